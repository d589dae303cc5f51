"""The CDC, outbox and broker claims as short runs on the real stack, each reaching the
verdict of the claims table (C3, C4, C5, C8, C14, C15, C15-counter, C16).

Each run lasts 8 s of workload (faults scaled with it) and is judged by the reference
checkers (the plain-Python specification, kept in agreement with Spark by the checker
tests); C3 also goes through the runner's Spark analysis end to end. C16 kills Kafka, so
it runs last and leaves the stack healthy again.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from reference_counts import predicted, reference_counts, run_events

from driftlab.checkers.reference import lost as lost_checker
from driftlab.checkers.verdict import HELD, REPRODUCED, judge
from driftlab.harness.app.run import run_scenario
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.history.schema import LOG_AUDIT
from driftlab.harness.lab.runner.runner import RunResult
from driftlab.harness.lab.scenario import CONVERGES, expect, faults
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.catalogue.registry import get_scenario

pytestmark = [pytest.mark.services, pytest.mark.slow]

DURATION = 8.0


def _run(stack: Stack, runs: Path, name: str, *, analyze: bool = False) -> RunResult:
    scenario = get_scenario(name).with_overrides(duration=DURATION)
    result = run_scenario(scenario, seed=7, runs_dir=runs, stack=stack, analyze=analyze)
    assert result.error is None, result.error
    assert result.quiesced, f"{name}: the pipeline did not drain"
    assert not result.fault_errors, result.fault_errors
    return result


def _assert_reproduced(stack: Stack, runs: Path, name: str) -> Path:
    result = _run(stack, runs, name)
    counts = reference_counts(result.run_dir)
    verdict = judge(counts, get_scenario(name).expectations)
    assert verdict.verdict == predicted(get_scenario(name).expectations), (
        name,
        verdict,
        counts,
        str(result.run_dir),
    )
    return result.run_dir


@pytest.mark.spark
def test_c3_consumer_crash_through_the_spark_analysis(
    stack: Stack, tmp_path: Path, spark: object
) -> None:
    result = _run(stack, tmp_path, "cdc-consumer-crash", analyze=True)
    assert result.verdict == REPRODUCED, (result.counts, str(result.run_dir))
    assert result.counts.get("duplicate-delivery", 0) > 0
    # Each kill struck while the consumer held a change it had received and not yet
    # committed: the redelivery the claim predicts had its cause every time.
    events = run_events(result.run_dir)
    starts = [e for e in events if e.type == "fault" and e.kind == "crash" and e.phase == "start"]
    assert starts
    for start in starts:
        assert json.loads(str(start.extra))["busy"] is True, start
        before = [e for e in events if e.type == "msg" and e.time < start.time]
        committed: dict[int, int] = {}
        for e in before:
            if e.action == "commit":
                committed[e.partition] = max(committed.get(e.partition, 0), e.offset)
        assert any(
            e.offset >= committed.get(e.partition, 0)
            for e in before
            if e.action == "deliver" and e.consumer != LOG_AUDIT
        ), start


@pytest.mark.parametrize(
    "name",
    [
        "cdc-counter-crash",
        "cdc-partitioned-crash",
        "cdc-store-partition",
        "cdc-store-partition-counter",
        "outbox-app-crash",
    ],
)
def test_claim_reaches_its_verdict(stack: Stack, tmp_path: Path, name: str) -> None:
    _assert_reproduced(stack, tmp_path, name)


def test_c4_every_crash_strikes_inside_a_batch(stack: Stack, tmp_path: Path) -> None:
    run_dir = _assert_reproduced(stack, tmp_path, "cdc-commit-before-apply")
    faults = [e for e in run_events(run_dir) if e.type == "fault" and e.kind == "crash"]
    starts = [e for e in faults if e.phase == "start"]
    assert len(starts) == 3
    # A crash while the consumer idles would lose nothing: the claim rests on these.
    assert all(json.loads(str(e.extra))["busy"] is True for e in starts), starts
    # The consumer committed past them and crashed: the changes it skipped are still in
    # the topic, as the log audit read it back after quiescence.
    lost = [a for a in lost_checker.check(run_events(run_dir)) if a.kind == "lost-write"]
    assert lost
    for a in lost:
        assert f"; its change is still {lost_checker.IN_LOG} at " in a.detail, a.detail
        assert any(e.get("consumer") == LOG_AUDIT for e in json.loads(a.evidence))


def test_a_cut_kafka_link_outlasting_the_commit_deadline_loses_nothing(
    stack: Stack, tmp_path: Path
) -> None:
    """The consumer's offset commits through a cut `consumer->kafka` give up after 5 s
    (librdkafka alone waited for the heal) and are retried; the cache still converges.
    After-apply: it commits every 500 ms what it applied. At 10 ms of work per change
    it falls behind the 150 writes/s, so when the cut begins it still holds fetched
    changes, applies them and has commits to make through the cut (without that lag a
    CI run committed everything 10 ms before the cut and tried no commit through it;
    a before-apply consumer commits only on receiving a batch, which the cut stalls)."""
    base = get_scenario("cdc-consumer-crash").with_overrides(duration=DURATION)
    scenario = replace(
        base,
        name="cdc-kafka-cut",
        setup_params={
            **base.setup_params,
            "commit": "after-apply",
            "commit_ms": 500,
            "apply_ms": 10,
        },
        # Not scaled with the duration: the cut must outlast the 5 s commit deadline.
        faults=faults({"kind": "cut", "target": "consumer->kafka", "at": 1.5, "duration": 6}),
        expectations=expect(absent=CONVERGES),
    )
    result = run_scenario(scenario, seed=7, runs_dir=tmp_path, stack=stack, analyze=False)
    assert result.error is None, result.error
    assert result.quiesced, "the pipeline did not drain"
    assert not result.fault_errors, result.fault_errors
    counts = reference_counts(result.run_dir)
    verdict = judge(counts, scenario.expectations)
    assert verdict.verdict == HELD, (verdict, counts, str(result.run_dir))
    logs = "".join(p.read_text() for p in RunDir(result.run_dir).logs.glob("consumer*.log"))
    assert "no answer from Kafka to an offset commit within 5 s" in logs
    commits = [e for e in run_events(result.run_dir) if e.action == "commit"]
    assert commits, "no offset commit was recorded"


def test_c16_acked_messages_survive_a_kafka_sigkill(stack: Stack, tmp_path: Path) -> None:
    run_dir = _assert_reproduced(stack, tmp_path, "broker-crash-acked")
    events = run_events(run_dir)
    produced = [e for e in events if e.action == "produce"]
    # Each send names its producer: nonmonotonic-send is judged (and absent).
    assert produced and {e.process for e in produced} <= {"c0", "c1", "c2", "c3"}
    acked = {e.msg_id for e in produced}
    read_back = {e.msg_id for e in events if e.action == "deliver" and e.consumer == "auditor"}
    assert acked and acked <= read_back
    crash = [e for e in events if e.type == "fault" and e.kind == "crash"]
    assert [e.phase for e in crash] == ["start", "stop"] and crash[0].target == "kafka"
    # Kafka came back: the shared stack stays usable for the tests after this one.
    stack.up("kafka", "connect")
    stack["connect"].wait_healthy(120)
