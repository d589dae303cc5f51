"""Faults at a moment: the `after` tables of a pipeline file, the schedule's checks of
the moments it names, the lag crossings, and a run on the real stack whose windows open
at the moments they name."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from pipeline_support import history, pipeline_text, run_text

from driftlab.harness.history import exitcodes
from driftlab.harness.lab.nemesis.nemesis import moment_finder
from driftlab.harness.lab.nemesis.schedule import Anchor, FaultSpec, Schedule
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.setups.moments import Moment, Moments
from driftlab.scenarios.pipeline.spec import PipelineError, load


@pytest.mark.parametrize(
    "table",
    [
        {"ready": "mirror", "nth": 2},
        {"write": 200},
        {"fault_start": 0},
        {"fault_end": 1, "nth": 2},
        {"lag": "cache", "above": 1.5},
        {"caught_up": "cache"},
    ],
)
def test_an_after_table_reads_back_as_written(table: dict[str, object]) -> None:
    assert Anchor.from_mapping(table).to_mapping() == table


@pytest.mark.parametrize(
    ("table", "names"),
    [
        ({"ready": "mirror", "write": 3}, "exactly one moment"),
        ({"restart": "mirror"}, "restart is not a field"),
        ({"write": "many"}, "the write's number"),
        ({"fault_end": -1}, "counted from 0"),
        ({"ready": "mirror", "nth": 0}, "count from 1"),
        ({"lag": "cache", "above": 0}, "above 0"),
        ("mirror", "not a table"),
    ],
)
def test_a_bad_after_table_names_the_fix(table: object, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        Anchor.from_mapping(table)


def test_a_fault_waiting_for_itself_or_a_missing_fault_is_refused() -> None:
    def at(event: str, subject: str) -> FaultSpec:
        return FaultSpec("crash", "c", 0.0, 1.0, after=Anchor(event, subject))

    with pytest.raises(ValueError, match=r"in a circle \(0 -> 1 -> 0\)"):
        Schedule((at("fault_end", "1"), at("fault_start", "0"))).validate()
    with pytest.raises(ValueError, match="waits for fault 4"):
        Schedule((at("fault_end", "4"),)).validate()


def test_a_pipeline_file_names_its_own_processes_and_mirror_stores(tmp_path: Path) -> None:
    text = pipeline_text("moments")
    path = tmp_path / "p.toml"
    path.write_text(text.replace('after = { ready = "sync", nth = 2 }', 'after = { ready = "x" }'))
    with pytest.raises(PipelineError, match=r"faults\[1\]\.after\.ready: 'x' is not a process"):
        load(path)
    path.write_text(text.replace("after = { write = 120 }", 'after = { lag = "nope" }'))
    with pytest.raises(PipelineError, match=r"after\.lag: 'nope' is not a store read as a mirror"):
        load(path)


def test_lag_and_caught_up_count_crossings() -> None:
    samples = [Moment("lag", "s", float(t), v) for t, v in enumerate([0, 0.7, 0.9, 0.2, 0, 0.8, 0])]

    def when(event: str, nth: int = 1) -> float | None:
        _, _, find = moment_finder(Anchor(event, "s", nth, 0.5))
        return find(samples)

    assert when("lag") == 1.0 and when("lag", 2) == 5.0 and when("lag", 3) is None
    # Back below the threshold is not caught up: only no lag at all is.
    assert when("caught_up") == 4.0 and when("caught_up", 2) == 6.0


def test_a_moment_reported_before_the_wait_is_found_and_one_never_reported_times_out() -> None:
    moments = Moments()
    moments.emit("ready", "p")
    stop = threading.Event()
    _, _, first = moment_finder(Anchor("ready", "p", 1))
    _, _, second = moment_finder(Anchor("ready", "p", 2))
    assert moments.wait("ready", "p", first, time.monotonic() + 5, stop) is not None
    assert moments.wait("ready", "p", second, time.monotonic() + 0.2, stop) is None


@pytest.mark.services
@pytest.mark.slow
def test_faults_open_at_the_moments_they_name(stack: Stack, tmp_path: Path) -> None:
    out = run_text(tmp_path, stack, pipeline_text("moments"), "p.toml", seed=4, analyze=False)
    r = out.run
    assert r.error is None and r.exit_code == exitcodes.OK, r.error
    assert out.not_converged == []
    events = history(r.run_dir)
    starts = {e["fault_id"]: e for e in events if e["type"] == "fault" and e["phase"] == "start"}
    stops = {
        e["fault_id"]: e["time"] / 1e9
        for e in events
        if e["type"] == "fault" and e["phase"] == "stop"
    }
    assert len(starts) == 4 and all(f in stops for f in starts)
    ordered = sorted(starts.values(), key=lambda e: e["time"])
    by_after = {json.loads(e["extra"]).get("after"): e for e in ordered}
    first = by_after[None]
    # The second crash: 0.2 s after the first restart was ready, which the first
    # crash's heal waited for before recording its stop.
    restart = by_after["sync ready after its 1st restart"]
    gap = restart["time"] / 1e9 - stops[first["fault_id"]]
    assert 0.15 <= gap < 1.0, gap  # its stop is recorded just after the ready line
    cut = by_after["fault 1 healed"]
    assert cut["target"] == "sync->postgres"
    assert cut["time"] / 1e9 >= stops[restart["fault_id"]]
    pause = by_after["the 120th acknowledged write"]
    acked = [e for e in events if e["type"] == "op" and e["phase"] == "ok" and e["f"] == "write"]
    assert sum(e["time"] <= pause["time"] for e in acked) >= 120
    (unmet,) = [e for e in events if e["type"] == "mark" and e["kind"] == "fault-unmet"]
    assert json.loads(unmet["extra"]) == {
        "fault": 4,
        "kind": "crash",
        "target": "sync",
        "after": "sync ready after its 8th restart",
        "why": "its moment never came",
    }
