"""Replay of a compaction of the change log (C9) on real PostgreSQL + Debezium + a
compacted Kafka topic: the cleaner compacts where the schedule says, and the store
rebuilt from offset 0 still equals the source."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_counts import run_events
from replay_support import judged, simulated

from driftlab.harness.app.replay import replay
from driftlab.harness.lab.explore.schedule import Step
from driftlab.harness.lab.replay.turnstile import ReplayError
from driftlab.harness.lab.services.stack import Stack

pytestmark = [pytest.mark.services, pytest.mark.slow]


def _rebuilt(run_dir: Path) -> list[str | None]:
    """The values the rebuild received, in offset order."""
    return [
        e.value
        for e in run_events(run_dir)
        if e.type == "msg" and e.action == "deliver" and e.consumer == "rebuild"
    ]


def test_a_compact_step_keeps_each_keys_latest_record(stack: Stack, tmp_path: Path) -> None:
    stack.up("postgres", "redis", "kafka", "connect")
    # C9 holds, so `driftlab explore` saves no schedule: this one is fixed, and the
    # simulator compacts k1's first value away at step 4.
    steps = [
        Step("db-write", "c1", "k1"),
        Step("db-write", "c2", "k1"),
        Step("db-write", "c1", "k2"),
        Step("compact"),
        Step("db-delete", "c2", "k1"),
        Step("db-write", "c1", "k2"),
    ]
    schedule = simulated("compacted-log", steps)
    assert [s.action for s in schedule.steps].count("compact") == 1
    run_dir = replay(schedule, runs_dir=tmp_path, stack=stack)

    rebuilt = _rebuilt(run_dir)
    written = [s.value for s in schedule.steps if s.action == "db-write"]
    # k1's first value is gone; everything after the compaction is still there (the
    # delete is Debezium's delete event and its tombstone, both without a value).
    assert rebuilt == [written[1], written[2], None, None, written[3]]
    found = judged(schedule, run_dir)
    assert "lost-write" in found
    assert not found & {"missing", "extra", "stale", "phantom"}


def test_a_compaction_the_active_segment_would_keep_is_refused(
    stack: Stack, tmp_path: Path
) -> None:
    stack.up("postgres", "redis", "kafka", "connect")
    schedule = simulated(
        "compacted-log",
        [Step("db-write", "c1", "k1"), Step("db-write", "c1", "k1"), Step("compact")],
    )
    with pytest.raises(ReplayError, match=r"never compacts the active segment.* k1 "):
        replay(schedule, runs_dir=tmp_path, stack=stack)
