"""Replay a schedule `driftlab explore` saved: look its simulated setup and its replay
driver up and hand both to the replay engine (driftlab.harness.lab.replay.replay), then judge the
run as any other (driftlab.harness.app.judge) and compare its kinds with the simulation's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from driftlab.harness.app.judge import Analysed, analyze_recorded, warm_analysis_server
from driftlab.harness.history import exitcodes
from driftlab.harness.history.rundir import RunDir, write_json_atomically
from driftlab.harness.lab.explore.schedule import Schedule
from driftlab.harness.lab.explore.spec import SetupSpec
from driftlab.harness.lab.replay.driver import ReplayDriver
from driftlab.harness.lab.replay.replay import (
    Comparison,
    ReplayOptions,
    check_replayable,
    compare,
    replay_schedule,
)
from driftlab.harness.lab.replay.turnstile import ReplayError
from driftlab.scenarios.catalogue.architectures import REPLAY_DRIVERS, SIMULATED_SETUPS

if TYPE_CHECKING:
    from rich.console import Console

    from driftlab.harness.lab.services.stack_protocol import ServiceStack


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
    """Run `schedule` on the real services and return its run directory (not analysed:
    `judge_replay` judges it); the options are
    driftlab.harness.lab.replay.replay.replay_schedule's."""
    spec, driver_class = replayable(schedule)
    return replay_schedule(schedule, spec, driver_class, **options)


@dataclass
class Replayed:
    """A replay judged: its analysis and report (driftlab.harness.app.judge) and how its anomaly
    kinds compare with the simulation's (None when the run proves nothing)."""

    analysed: Analysed
    comparison: Comparison | None

    @property
    def exit_code(self) -> int:
        """0 the real run shows the simulated kinds, 1 it does not, 3 it proves nothing
        (a kind it had no chance to show, or the lab failed)."""
        if self.comparison is None:
            return exitcodes.LAB_FAILED
        return exitcodes.OK if self.comparison.same else exitcodes.VERDICT


def judge_replay(
    schedule: Schedule,
    run_dir: Path,
    *,
    spark_master: str | None,
    console: Console,
    stack: ServiceStack | None = None,
) -> Replayed:
    """Judge the replay of `schedule` in `run_dir` as `driftlab analyze` judges a run,
    its report included (on the warm Spark of `stack`, or of a running `driftlab up`,
    when it answers), then write RUN_DIR/replay.json with both lists of kinds. Raises
    what the analysis raised (driftlab.harness.app.judge.analysis_failure tells it in one line)."""
    folder = RunDir(run_dir)
    server = None if spark_master else warm_analysis_server(stack)
    analysed = analyze_recorded(
        folder, spark_master=spark_master, console=console, server=server, report=True
    )
    result = analysed.result
    if result.reasons:
        # Kinds the real run had no chance to show, or a lab that failed, compare nothing.
        return Replayed(analysed, None)
    comparison = compare(schedule, [kind for kind, n in result.counts.items() if n])
    write_json_atomically(
        folder.replay,
        {"simulated": sorted(comparison.expected), "real": sorted(comparison.found)},
    )
    return Replayed(analysed, comparison)
