"""Claim C6 on real Kafka: a topic keeping 3 s of data, a fast and a slow consumer.

A short run of the scenario, judged by the reference checkers (the specification the
Spark jobs agree with): the slow consumer, and only it, loses messages.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message
from reference_counts import reference_anomalies, run_events
from setup_fixtures import make_context

from driftlab.checkers.reference.lost import IN_LOG, NOT_IN_LOG
from driftlab.checkers.verdict import PRESENT, judge
from driftlab.harness.app.run import run_scenario
from driftlab.harness.history.schema import LOG_AUDIT
from driftlab.harness.lab.scenario import Scenario
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.setups.base import SetupContext
from driftlab.harness.lab.workload.spec import WorkloadSpec
from driftlab.scenarios.architectures.bounded_log.setup import (
    CONSUMER_LINK,
    FAST,
    SLOW,
    BoundedLog,
    LogConsumer,
)
from driftlab.scenarios.catalogue.architectures import register_setup
from driftlab.scenarios.catalogue.registry import get_scenario


def test_segments_must_be_shorter_than_retention(tmp_path: Path) -> None:
    ctx = make_context(None, tmp_path, "bl-params", retention_ms=1000, segment_ms=1000)
    with pytest.raises(ValueError, match="segment_ms < retention_ms"):
        BoundedLog().prepare(ctx)


@pytest.mark.services
@pytest.mark.slow
def test_slow_consumer_loses_messages_fast_one_none(stack: Stack, tmp_path: Path) -> None:
    # The full 10 s: the slow window must outlast the 3 s of retention by a margin.
    sc = get_scenario("C6")
    result = run_scenario(sc, seed=1, runs_dir=tmp_path / "runs", stack=stack, analyze=False)
    assert result.error is None and result.quiesced
    anomalies = reference_anomalies(result.run_dir)
    counts = Counter(a.kind for a in anomalies)
    verdict = judge(counts, sc.expectations)
    assert verdict.verdict == "reproduced", (counts, verdict)
    lost = [a for a in anomalies if a.kind == "lost-message"]
    assert {a.consumer for a in lost} == {SLOW}
    events = run_events(result.run_dir)
    produced = {e.msg_id for e in events if e.type == "msg" and e.action == "produce"}
    to_fast = {e.msg_id for e in events if e.action == "deliver" and e.consumer == FAST}
    assert produced and to_fast == produced
    done = {
        e.consumer: json.loads(e.extra or "{}")
        for e in events
        if e.type == "mark" and e.kind == "consumer-done"
    }
    assert done[FAST]["skipped_offsets"] == 0
    # An unacknowledged write may sit in the log without a `produce`: skipped >= lost.
    assert done[SLOW]["skipped_offsets"] >= len(lost)
    # Where they went: the log, read back after quiescence, no longer holds any of them.
    assert LOG_AUDIT in done
    assert all(f"; {NOT_IN_LOG} read back after quiescence" in a.detail for a in lost)
    assert not any(LOG_AUDIT in a.evidence for a in lost)
    # Retention may have emptied the log by then: the audit read what was left, if any.
    in_log = {e.msg_id for e in events if e.action == "deliver" and e.consumer == LOG_AUDIT}
    lost_ids = {json.loads(a.evidence)[0]["msg_id"] for a in lost}
    assert in_log <= produced and not in_log & lost_ids


class SkippingConsumer(LogConsumer):
    """A consumer bug: every fifth record is read and dropped without a trace."""

    def deliver(self, msg: Message) -> None:
        if msg.offset() % 5 == 4:
            self.position = msg.offset() + 1
            return
        super().deliver(msg)


@register_setup
class SkippingLog(BoundedLog):
    """The bounded log with long retention and a fast consumer that skips records."""

    name = "bounded-log-skipping"

    def prepare(self, ctx: SetupContext) -> None:
        super().prepare(ctx)
        self.consumers[FAST].kafka.close()
        kafka = kafka_client_config(ctx.stack, CONSUMER_LINK)
        self.consumers[FAST] = SkippingConsumer(
            FAST, self.topic, kafka, ctx.recorder, 0.0, prefetch=True
        )


@pytest.mark.services
@pytest.mark.slow
def test_a_message_the_consumer_skipped_is_still_in_the_log(stack: Stack, tmp_path: Path) -> None:
    sc = _keep_all(
        SkippingLog,
        "A consumer that drops every fifth record it reads, on a log that keeps all.",
        duration=3,
        expectations={"lost-message": PRESENT},
    )
    result = run_scenario(sc, seed=2, runs_dir=tmp_path / "runs", stack=stack, analyze=False)
    assert result.error is None and result.quiesced
    lost = [a for a in reference_anomalies(result.run_dir) if a.kind == "lost-message"]
    assert lost and {a.consumer for a in lost} == {FAST}
    for a in lost:
        assert f"; still {IN_LOG} at " in a.detail and "the consumer skipped it" in a.detail
        audit = [e for e in json.loads(a.evidence) if e.get("consumer") == LOG_AUDIT]
        assert len(audit) == 1 and audit[0]["offset"] % 5 == 4


def test_slow_consumer_fault_names_the_consumers(tmp_path: Path) -> None:
    setup = BoundedLog()
    with pytest.raises(ValueError, match="'fast' or 'slow'"):
        setup.slow_consumer("nobody", 0.1)


@register_setup
class UnreadLog(BoundedLog):
    """The bounded log whose consumers are never started: a pipeline that reads nothing."""

    name = "bounded-log-unread"

    def start(self) -> None:
        """Start nothing: the writes go in, nobody reads them."""

    def teardown(self) -> None:
        for c in self.consumers.values():
            c.kafka.close()


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.spark
def test_a_run_whose_consumers_never_started_is_inconclusive(
    stack: Stack, tmp_path: Path, spark: object
) -> None:
    sc = _keep_all(
        UnreadLog,
        "Acknowledged produces into a log whose consumers never start.",
        duration=2,
        expectations={"poll-skip": PRESENT},
        quiesce_timeout=3.0,
    )
    result = run_scenario(sc, seed=3, runs_dir=tmp_path / "runs", stack=stack)
    assert result.verdict == "inconclusive" and result.exit_code == 3, result.error
    # No consumer delivery: poll-skip, the kind the claim names, had no chance.
    assert len(result.inconclusive) == 1
    assert result.inconclusive[0].startswith(
        "nothing the run names was tested: poll-skip had no chance in this history: "
    )
    analysis = json.loads(result.run_dir.analysis.read_text())
    assert analysis["inconclusive"] == result.inconclusive
    assert analysis["coverage"]["poll-skip"] == 0
    assert "poll-skip had no chance" in result.run_dir.report.read_text()


def _keep_all(setup: type[BoundedLog], summary: str, duration: float, **fields: Any) -> Scenario:
    """A short scenario of `setup` (named after it) on a log that keeps every record for
    ten minutes: two clients writing 40/s."""
    return Scenario(
        name=setup.name,
        setup=setup.name,
        summary=summary,
        setup_params={"retention_ms": 600_000, "segment_ms": 1000},
        workload=WorkloadSpec(clients=2, keys=10, rate=40, duration=duration),
        **fields,
    )
