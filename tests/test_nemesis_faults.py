"""The nemesis on real services: windows open and close on time, are recorded, heal."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis
from setup_fixtures import events, make_context

from driftlab.harness.lab.nemesis import FaultSpec, Nemesis, Schedule
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.setups.base import AppCrash
from driftlab.harness.lab.setups.connect import endpoint, redis_client
from driftlab.scenarios.architectures.dual_write.setup import DualWrite

pytestmark = pytest.mark.services


def _faults(evs: list[dict[str, object]]) -> list[tuple[object, object, object]]:
    return [(e["phase"], e["kind"], e.get("target")) for e in evs if e["type"] == "fault"]


def test_crash_and_latency_windows_overlap_and_heal(stack: Stack, tmp_path: Path) -> None:
    stack.up("redis")
    ctx = make_context(stack, tmp_path, "nemesis")
    schedule = Schedule(
        (
            FaultSpec("latency", "redis", 0.0, 2.0, {"ms": 100}),
            FaultSpec("crash", "redis", 1.0, 0.6),
        )
    )
    app = redis_client(endpoint(stack, "redis"), timeout=3)
    app.ping()  # connected and authenticated before the faults
    nemesis = Nemesis(schedule, DualWrite(), ctx)
    nemesis.start()
    time.sleep(0.2)
    t = time.monotonic()
    app.ping()
    assert time.monotonic() - t >= 0.2  # 100 ms each way: the toxic is on the app's link
    time.sleep(0.9)  # inside the crash window
    assert not stack["redis"].is_running()
    nemesis.stop()  # the schedule ran out; heal_all closes nothing twice
    nemesis.heal_all()
    assert stack["redis"].is_running()
    app = redis_client(endpoint(stack, "redis"), timeout=3)
    t = time.monotonic()
    assert app.ping()
    assert time.monotonic() - t < 0.2
    assert _faults(events(ctx)) == [
        ("start", "latency", "redis"),
        ("start", "crash", "redis"),
        ("stop", "crash", "redis"),
        ("stop", "latency", "redis"),
    ]
    assert nemesis.errors == []
    ctx.recorder.close()  # type: ignore[attr-defined]


def test_heal_all_closes_open_windows_early(stack: Stack, tmp_path: Path) -> None:
    stack.up("redis")
    ctx = make_context(stack, tmp_path, "nemesis-heal")
    nemesis = Nemesis(Schedule((FaultSpec("pause", "redis", 0.0, 60.0),)), DualWrite(), ctx)
    nemesis.start()
    time.sleep(0.3)
    with pytest.raises(redis.TimeoutError):
        redis_client(endpoint(stack, "redis", direct=True), timeout=0.5).ping()
    nemesis.heal_all()
    assert redis_client(endpoint(stack, "redis", direct=True), timeout=2).ping()
    assert _faults(events(ctx)) == [("start", "pause", "redis"), ("stop", "pause", "redis")]
    ctx.recorder.close()  # type: ignore[attr-defined]


def test_app_crash_window_arms_the_step_point(stack: Stack, tmp_path: Path) -> None:
    ctx = make_context(stack, tmp_path, "nemesis-app")
    spec = FaultSpec("app-crash", "app", 0.0, 0.5, {"p": 1.0, "point": "after-source-write"})
    nemesis = Nemesis(Schedule((spec,)), DualWrite(), ctx)
    nemesis.start()
    time.sleep(0.2)
    ctx.steps.reach("before-anything", "c0", "k")  # other points are untouched
    with pytest.raises(AppCrash):
        ctx.steps.reach("after-source-write", "c0", "k")
    time.sleep(0.5)
    ctx.steps.reach("after-source-write", "c0", "k")  # window closed: no crash
    nemesis.heal_all()
    marks = [e for e in events(ctx) if e["type"] == "mark" and e["kind"] == "app-crash"]
    assert len(marks) == 1 and marks[0]["process"] == "c0"
    ctx.recorder.close()  # type: ignore[attr-defined]


def test_a_fault_on_an_unknown_target_is_recorded_not_raised(stack: Stack, tmp_path: Path) -> None:
    ctx = make_context(stack, tmp_path, "nemesis-bad")
    nemesis = Nemesis(Schedule((FaultSpec("crash", "mainframe", 0.0, 0.2),)), DualWrite(), ctx)
    nemesis.start()
    time.sleep(0.4)
    nemesis.heal_all()
    assert nemesis.errors and "mainframe" in nemesis.errors[0]
    stops = [e for e in events(ctx) if e["type"] == "fault" and e["phase"] == "stop"]
    assert len(stops) == 1 and "not injected" in str(stops[0]["error"])
    ctx.recorder.close()  # type: ignore[attr-defined]
