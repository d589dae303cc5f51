"""Replay of C6, as `driftlab explore bounded-log` finds it, on real Kafka: the slow
consumer falls behind the log's start and misses what retention deleted."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_counts import reference_anomalies, run_events
from replay_support import explored, judged, simulated

from driftlab.harness.app.replay import replay
from driftlab.harness.lab.explore.schedule import Step
from driftlab.harness.lab.replay.turnstile import ReplayError
from driftlab.harness.lab.services.stack import Stack

pytestmark = pytest.mark.services


def test_slow_consumer_misses_what_retention_deleted(stack: Stack, tmp_path: Path) -> None:
    stack.up("kafka")
    schedule = explored("slow-consumer-loses", seed=1)
    run_dir = replay(schedule, runs_dir=tmp_path, seed=1, stack=stack)

    events = run_events(run_dir)
    delivered: dict[str | None, list[str | None]] = {}
    for e in events:
        if e.type == "msg" and e.action == "deliver":
            delivered.setdefault(e.consumer, []).append(e.value)
    written = [s.value for s in schedule.steps if s.action == "db-write"]
    assert delivered["fast"] == written
    # The log kept the last 3 records: the slow consumer starts at the fourth-last.
    assert delivered["slow"] == written[-3:]
    lost = [a for a in reference_anomalies(run_dir) if a.kind == "lost-message"]
    assert lost and {a.consumer for a in lost} == {"slow"}
    judged(schedule, run_dir)


WRITE = Step("db-write", "c1", "k1")  # the simulator fills in the unique value


def test_slow_polls_read_the_log_then_skip_past_its_start(stack: Stack, tmp_path: Path) -> None:
    stack.up("kafka")
    # slow reads the first record, falls five writes behind, then reads again.
    steps = [WRITE, Step("poll", "slow"), *[WRITE] * 5, Step("poll", "slow")]
    schedule = simulated("bounded-log", steps)
    assert "lost-message" in {a["kind"] for a in schedule.anomalies}
    run_dir = replay(schedule, runs_dir=tmp_path, stack=stack)

    slow = [
        (e.offset, e.value)
        for e in run_events(run_dir)
        if e.type == "msg" and e.action == "deliver" and e.consumer == "slow"
    ]
    # Offset 0 by the first poll; the second finds offsets 1 and 2 deleted.
    assert slow[:2] == [(0, "c1-1"), (3, "c1-4")]
    judged(schedule, run_dir)


def test_a_poll_that_receives_another_value_fails_by_name(stack: Stack, tmp_path: Path) -> None:
    stack.up("kafka")
    schedule = simulated("bounded-log", [WRITE, Step("poll", "slow")])
    wrong = [*schedule.steps[:1], Step("poll", "slow", "k1", "c9-9"), schedule.steps[-1]]
    schedule.steps = wrong
    with pytest.raises(ReplayError, match=r"step 2 \(consumer slow .*received 'c1-1', not 'c9-9'"):
        replay(schedule, runs_dir=tmp_path, stack=stack)
