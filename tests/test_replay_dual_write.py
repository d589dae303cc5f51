"""Replay of the Figure 11-4 race, as `driftlab explore dual-write` finds it, on real
PostgreSQL and Redis, judged by the reference checkers and as `driftlab replay` judges it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from reference_counts import run_events
from replay_support import explored, judged
from rich.console import Console

from driftlab.checkers.verdict import REPRODUCED
from driftlab.harness.app.replay import judge_replay, replay
from driftlab.harness.history import exitcodes
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.explore.schedule import Schedule, Step
from driftlab.harness.lab.replay.replay import compare
from driftlab.harness.lab.replay.turnstile import ReplayError
from driftlab.harness.lab.services.stack import Stack

pytestmark = pytest.mark.services


def test_dual_write_race_replays_on_postgres_and_redis(stack: Stack, tmp_path: Path) -> None:
    stack.up("postgres", "redis")
    schedule = explored("dual-write-converges", seed=11)
    run_dir = replay(schedule, runs_dir=tmp_path, seed=11, stack=stack)

    events = run_events(run_dir)
    # The forced order: each client's cache write lands in the schedule's order.
    cache_oks = [
        (e.process, e.value)
        for e in events
        if e.type == "op" and e.store == "cache" and e.phase == "ok"
    ]
    scheduled = [(s.actor, s.value) for s in schedule.steps if s.action == "cache-write"]
    assert cache_oks == scheduled
    found = judged(schedule, run_dir)
    assert {"stale-overwrite", "stale"} <= found
    # A simulation that had claimed another kind is told apart, both ways.
    claimed = Schedule(schedule.setup, schedule.steps, anomalies=[{"kind": "lost-write"}])
    differs = compare(claimed, found)
    assert not differs.same
    assert differs.missing == ["lost-write"]
    assert differs.extra == sorted(found)


def test_a_replay_is_judged_as_a_run_is(stack: Stack, spark: object, tmp_path: Path) -> None:
    # `driftlab replay`'s path: the Spark analysis and its verdict (driftlab.harness.app.judge),
    # the report, then the comparison with the simulation in replay.json.
    stack.up("postgres", "redis")
    schedule = explored("dual-write-converges", seed=11)
    run_dir = replay(schedule, runs_dir=tmp_path, seed=11, stack=stack)
    out = io.StringIO()
    replayed = judge_replay(
        schedule, run_dir, spark_master=None, console=Console(file=out), stack=stack
    )
    result = replayed.analysed.result
    assert result.verdict == REPRODUCED and replayed.exit_code == exitcodes.OK, out.getvalue()
    simulated = sorted({a["kind"] for a in schedule.anomalies})
    assert replayed.comparison is not None and replayed.comparison.same
    folder = RunDir(run_dir)
    assert json.loads(folder.replay.read_text()) == {"simulated": simulated, "real": simulated}
    assert replayed.analysed.report == folder.report and folder.report.is_file()


def test_a_step_the_stack_cannot_take_fails_the_replay_by_name(
    stack: Stack, tmp_path: Path
) -> None:
    stack.up("postgres", "redis")
    # c1 has no db write in flight: nothing is parked where its cache write would go.
    schedule = Schedule(
        "dual-write",
        [Step("db-write", "c1", "k1", "c1-1"), Step("cache-write", "c2", "k1"), Step("quiesce")],
    )
    with pytest.raises(ReplayError, match=r"step 2 \(client c2 .*c2 is not started"):
        replay(schedule, runs_dir=tmp_path, stack=stack, step_timeout=20)
    (run_dir,) = (tmp_path / "replay-dual-write").iterdir()
    assert not [e for e in run_events(run_dir) if e.type == "mark" and e.kind == "end"]


def test_client_crash_between_writes_loses_the_cache_write(stack: Stack, tmp_path: Path) -> None:
    stack.up("postgres", "redis")
    schedule = explored("dual-write-crash-loses-keys", seed=3)
    run_dir = replay(schedule, runs_dir=tmp_path, seed=3, stack=stack)
    events = run_events(run_dir)
    assert any(e.type == "mark" and e.kind == "app-crash" for e in events)
    assert "missing" in judged(schedule, run_dir)
