"""Run a scenario: look its setup up, run it on the engine, judge it (the verdict
weighs what the setup found: a store that did not converge), render its report. The
CLI's `run`, `suite` and `matrix` and the pytest plugin come through here."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Required, TypedDict

from driftlab.harness.app.judge import WarmSpark, judge_facts, judge_run, write_report
from driftlab.harness.lab.runner.runner import RunResult, note_interrupted, record_run
from driftlab.harness.lab.runner.signals import interrupting
from driftlab.harness.lab.runner.workload_driver import Tick
from driftlab.harness.lab.scenario import Scenario
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.harness.lab.setups.base import Setup
from driftlab.scenarios.catalogue.architectures import setup_factory


def check_scenario(scenario: Scenario) -> Callable[[], Setup]:
    """What builds the setup `scenario` runs on, once the scenario is valid; a
    ValueError names what is wrong and how to fix it."""
    scenario.validate()
    return setup_factory(scenario)


class RunOptions(TypedDict, total=False):
    """The options of `run_scenario` past the scenario, for callers that pass them on."""

    seed: Required[int]
    runs_dir: Required[Path]
    spark_master: str | None
    server: WarmSpark | None
    stack: ServiceStack | None
    analyze: bool
    tick: Tick | None
    stop: threading.Event | None


def run_scenario(
    scenario: Scenario,
    *,
    seed: int,
    runs_dir: Path,
    spark_master: str | None = None,
    server: WarmSpark | None = None,
    stack: ServiceStack | None = None,
    analyze: bool = True,
    tick: Tick | None = None,
    stop: threading.Event | None = None,
) -> RunResult:
    """Run `scenario` once and judge it; never raises for a failed run, see `exit_code`.

    `stack` is a running stack to use (the suite shares one); None reuses a stack
    started by `driftlab up` or starts one for this run and stops it afterwards.
    `stop` lets a caller outside the main thread cut the run short. `server` is the
    warm analysis server of the stack in use (driftlab.harness.app.judge.warm_spark): the run is
    analysed there while it answers, else in this process.
    """
    setup = check_scenario(scenario)()
    judge = (
        partial(judge_run, master=spark_master, server=server, tick=tick, stop=stop)
        if analyze
        else judge_facts
    )
    result = None
    try:
        # Heard from record_run's end to the report's: a signal in between is the
        # report's, never one that escapes with no result.
        with interrupting("report"):
            result = record_run(
                scenario,
                setup,
                seed=seed,
                runs_dir=runs_dir,
                stack=stack,
                judge=judge,
                tick=tick,
                stop=stop,
            )
            if analyze and result.verdict is not None:
                write_report(result.run_dir)
    except KeyboardInterrupt:
        if result is None:
            raise
        note_interrupted(result, "report")
    return result
