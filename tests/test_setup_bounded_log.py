"""Claim C6 on real Kafka: a topic keeping 3 s of data, a fast and a slow consumer.

A short run of the scenario, judged by the reference checkers (the specification the
Spark jobs agree with): the slow consumer, and only it, loses messages.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_counts import reference_anomalies, run_events
from setup_fixtures import make_context

from checkers.verdict import judge
from harness.runner.runner import run_scenario
from harness.services.stack import Stack
from harness.setups.bounded_log import FAST, SLOW, BoundedLog
from scenarios.registry import get_scenario


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
    counts: dict[str, int] = {}
    for a in anomalies:
        counts[a.kind] = counts.get(a.kind, 0) + 1
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


def test_slow_consumer_fault_names_the_consumers(tmp_path: Path) -> None:
    setup = BoundedLog()
    with pytest.raises(ValueError, match="'fast' or 'slow'"):
        setup.slow_consumer("nobody", 0.1)
