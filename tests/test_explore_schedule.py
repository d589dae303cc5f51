"""The schedule file: round trips, and malformed files give errors that say what to fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings

from driftlab.harness.lab.explore.schedule import Schedule, ScheduleError, Step
from driftlab.harness.lab.explore.search import simulate
from driftlab.harness.lab.explore.strategies import schedules
from driftlab.scenarios.catalogue.architectures import SIMULATED_SETUPS


@settings(max_examples=40, deadline=None)
@given(schedules(SIMULATED_SETUPS["cdc"]))
def test_executed_schedule_round_trips_through_json(steps: list[Step]) -> None:
    run = SIMULATED_SETUPS["cdc"].run(steps)
    sched = Schedule("cdc", run.executed, seed=7, property="p", examples=3, params={"x": 1})
    back = Schedule.from_json(sched.to_json())
    assert back == sched
    # The executed schedule runs again to the same history: nothing it needs is left out.
    assert simulate(SIMULATED_SETUPS["cdc"], back).events == run.events


def test_schedule_file_round_trips(tmp_path: Path) -> None:
    steps = [Step("db-write", "c1", "k1", "c1-1"), Step("poll", "g", partition=1, offset=0)]
    sched = Schedule("cdc", steps, seed=1, anomalies=[{"checker": "lost", "kind": "lost-write"}])
    path = tmp_path / "schedule.json"
    sched.save(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "driftlab-schedule" and doc["version"] == 1
    assert doc["steps"][1] == {"action": "poll", "actor": "g", "partition": 1, "offset": 0}
    assert Schedule.load(path) == sched


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ('{"steps": []}', "not a schedule"),
        ('{"format": "driftlab-schedule", "version": 99}', "regenerate"),
        ('{"format": "driftlab-schedule", "version": 1, "setup": "cdc"}', '"steps"'),
        (
            '{"format": "driftlab-schedule", "version": 1, "setup": "cdc", '
            '"steps": [{"action": "dance"}]}',
            "action must be one of",
        ),
        (
            '{"format": "driftlab-schedule", "version": 1, "setup": "cdc", '
            '"steps": [{"action": "heal", "when": 3}]}',
            "unknown fields",
        ),
    ],
)
def test_malformed_schedules_are_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        Schedule.from_json(text)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ScheduleError, match="cannot read"):
        Schedule.load(tmp_path / "nope.json")
