"""Replay of C12's race, as `driftlab explore event-sourced` finds it, on the real
PostgreSQL event log, with and without the expected-version check, judged by the
reference checkers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_counts import run_events
from replay_support import explored, judged, simulated

from driftlab.harness.app.replay import replay
from driftlab.harness.lab.services.stack import Stack

pytestmark = pytest.mark.services


def _withdrawals(run_dir: Path) -> list[tuple[str | None, str | None]]:
    """(process, phase) of every completed -1 command, in completion order."""
    events = run_events(run_dir)
    withdraws = {
        e.op_id
        for e in events
        if e.type == "op" and e.phase == "invoke" and json.loads(e.extra or "{}").get("delta") == -1
    }
    return [
        (e.process, e.phase)
        for e in events
        if e.type == "op" and e.op_id in withdraws and e.phase != "invoke"
    ]


def test_unchecked_appends_overdraw_the_account(stack: Stack, tmp_path: Path) -> None:
    stack.up("postgres")
    schedule = explored("unchecked-invariant", seed=1)
    run_dir = replay(schedule, runs_dir=tmp_path, seed=1, stack=stack)

    # Both withdrawals were validated against the one deposit, and both landed.
    assert sorted(_withdrawals(run_dir)) == [("c1", "ok"), ("c2", "ok")]
    assert "invariant-violation" in judged(schedule, run_dir)


def test_checked_appends_refuse_the_second_withdrawal(stack: Stack, tmp_path: Path) -> None:
    stack.up("postgres")
    race = explored("unchecked-invariant", seed=1)
    schedule = simulated("event-sourced-checked", race.steps)
    assert schedule.steps == race.steps  # every step of the race still runs
    assert schedule.anomalies == []
    run_dir = replay(schedule, runs_dir=tmp_path, seed=1, stack=stack)

    # The second append found another event after the version it validated against.
    assert [phase for _, phase in _withdrawals(run_dir)] == ["ok", "fail"]
    assert "invariant-violation" not in judged(schedule, run_dir)
