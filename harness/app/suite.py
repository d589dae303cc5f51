"""The claims suite: chosen scenarios in order on one shared stack, then the index.

The caller sees the suite's progress through two callbacks (a runner tick per
scenario, a word when each is done) and prints what it likes: the application never
prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from driftlab.harness.app.judge import judging_spark
from driftlab.harness.app.run import RunOptions, run_scenario
from driftlab.harness.app.suite_index import write_index
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.runner.runner import RunResult
from driftlab.harness.lab.runner.stack_use import acquire_stack
from driftlab.harness.lab.runner.workload_driver import Tick
from driftlab.harness.lab.scenario import Scenario
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.scenarios.catalogue.architectures import setup_services

TickFor = Callable[[str, Scenario], Tick]
"""The runner tick of one scenario, given its label (`[i/n] claim name`)."""
Done = Callable[[str, RunResult], None]
"""Told each run as it ends, with its label."""


@dataclass
class SuiteResult:
    """What the suite ran, its wall time, its index page and its exit status; `error`
    says why nothing ran when the stack could not start."""

    results: list[RunResult] = field(default_factory=list)
    wall_s: float = 0.0
    index: Path | None = None
    exit_code: int = exitcodes.OK
    error: str | None = None

    @property
    def interrupted(self) -> bool:
        """Whether the suite stopped at a Ctrl-C (a run's, or between runs)."""
        return self.exit_code == exitcodes.INTERRUPTED


def services_of(chosen: list[Scenario]) -> list[str]:
    """Every service the chosen scenarios' setups need, sorted."""
    return sorted({s for sc in chosen for s in setup_services(sc)})


def run_suite(
    chosen: list[Scenario],
    *,
    seed: int,
    runs_dir: Path,
    spark_master: str | None = None,
    backend: str = "local",
    stack: ServiceStack | None = None,
    tick_for: TickFor | None = None,
    done: Done | None = None,
) -> SuiteResult:
    """Run `chosen` in order on one stack (`stack`, else the running `driftlab up` stack
    or one of the suite's own), write runs/index.json and the suite page; never raises
    for a failed run or a stack that would not start (see `exit_code` and `error`)."""
    out = SuiteResult()
    started = time.monotonic()
    try:
        _run_all(chosen, seed, runs_dir, spark_master, backend, stack, out.results, tick_for, done)
    except ServiceError as exc:
        # The stack could not start (a port taken, no Docker engine): nothing ran.
        out.exit_code, out.error = exitcodes.LAB_FAILED, str(exc)
        return out
    except KeyboardInterrupt:
        # Between runs (starting or stopping the stack): the stack is already down.
        out.exit_code = exitcodes.INTERRUPTED
        return out
    out.wall_s = time.monotonic() - started
    out.index = write_index(runs_dir, chosen, out.results, out.wall_s)
    out.exit_code = _exit_code(out.results)
    return out


def _run_all(
    chosen: list[Scenario],
    seed: int,
    runs_dir: Path,
    spark_master: str | None,
    backend: str,
    given: ServiceStack | None,
    results: list[RunResult],
    tick_for: TickFor | None,
    done: Done | None,
) -> None:
    """Run the scenarios in order on one stack, appending to `results`: judged on the
    warm Spark of the `driftlab up` stack they reuse when it has one, else by this
    process's, started now beside the first run."""
    # Without a stack given, only a local run reuses the `driftlab up` stack's server.
    server = judging_spark(given, spark_master, runs_dir, reuse=backend == "local" or bool(given))
    with acquire_stack(services_of(chosen), given, backend=backend) as stack:
        shared: RunOptions = {
            "seed": seed,
            "runs_dir": runs_dir,
            "spark_master": spark_master,
            "server": server,
            "stack": stack,
        }
        for i, sc in enumerate(chosen, 1):
            label = f"[{i}/{len(chosen)}] {sc.claim or ''} {sc.name}"
            result = run_scenario(sc, **shared, tick=tick_for(label, sc) if tick_for else None)
            results.append(result)
            if done:
                done(label, result)
            if result.exit_code == exitcodes.INTERRUPTED:
                break


def _exit_code(results: list[RunResult]) -> int:
    codes = {r.exit_code for r in results}
    if exitcodes.INTERRUPTED in codes:
        return exitcodes.INTERRUPTED
    # A wrong verdict outranks a failed run: 1 must mean the verdict, 3 the lab alone.
    for code in (exitcodes.VERDICT, exitcodes.LAB_FAILED, exitcodes.BAD_INPUT):
        if code in codes:
            return code
    return exitcodes.OK
