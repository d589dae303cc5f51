"""Replay of the commit-before-apply loss, as `driftlab explore cdc-commit-before` finds
it, on real PostgreSQL + Debezium + Kafka + consumer process + Redis, judged by the
reference checkers."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_counts import reference_anomalies, run_events

from harness.explore.properties import PROPERTIES
from harness.explore.search import search
from harness.replay.replay import compare, replay
from harness.services.stack import Stack

pytestmark = [pytest.mark.services, pytest.mark.slow]


def test_commit_before_apply_loss_replays_on_the_cdc_pipeline(stack: Stack, tmp_path: Path) -> None:
    stack.up("postgres", "redis", "kafka", "connect")
    (prop,) = [p for p in PROPERTIES if p.name == "commit-before-apply-loses"]
    result = search(prop, examples=500, seed=5)
    assert result.found
    schedule = result.schedule()
    run_dir = replay(schedule, runs_dir=tmp_path, seed=5, stack=stack)

    events = run_events(run_dir)
    msgs = [(e.action, e.value) for e in events if e.type == "msg" and e.action != "produce"]
    polled = [s.value for s in schedule.steps if s.action == "poll"]
    # The forced steps: the scheduled message was received by the first instance, whose
    # commit moved past it before the SIGKILL; nothing of it was ever applied.
    first = [e for e in events if e.type == "msg" and (e.process or "").endswith("#1")]
    assert [e.value for e in first if e.action == "deliver"] == polled
    assert any(e.action == "commit" for e in first)
    assert ("apply", polled[0]) not in msgs
    found = {a.kind for a in reference_anomalies(run_dir)}
    assert "lost-write" in found
    comparison = compare(schedule, found)
    assert comparison.same, comparison
