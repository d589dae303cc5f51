"""Replay a schedule `driftlab explore` saved: look its simulated setup and its replay
driver up and hand both to the replay engine (harness.replay.replay)."""

from __future__ import annotations

from pathlib import Path
from typing import Unpack

from harness.architectures.registry import REPLAY_DRIVERS, SIMULATED_SETUPS
from harness.explore.schedule import Schedule
from harness.explore.spec import SetupSpec
from harness.replay.driver import ReplayDriver
from harness.replay.replay import ReplayOptions, check_replayable, replay_schedule
from harness.replay.turnstile import ReplayError


def replayable(schedule: Schedule) -> tuple[SetupSpec, type[ReplayDriver]]:
    """The simulated setup and the replay driver of `schedule`; ReplayError, naming the
    fix, when it cannot be replayed: an unknown setup or a step its simulator never
    takes. Every simulated setup has a driver (tests/test_replay_cli.py holds REPLAY_DRIVERS
    to SIMULATED_SETUPS)."""
    spec = SIMULATED_SETUPS.get(schedule.setup)
    if spec is None:
        raise ReplayError(
            f"setup {schedule.setup!r} is not one `driftlab explore` simulates: a schedule "
            f"names one of {', '.join(SIMULATED_SETUPS)}"
        )
    check_replayable(schedule, spec)
    return spec, REPLAY_DRIVERS[schedule.setup]


def replay(schedule: Schedule, **options: Unpack[ReplayOptions]) -> Path:
    """Run `schedule` on the real services and return its run directory (not analysed);
    the options are harness.replay.replay.replay_schedule's."""
    spec, driver_class = replayable(schedule)
    return replay_schedule(schedule, spec, driver_class, **options)
