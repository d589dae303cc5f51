"""The chaos matrix: scenarios x fault schedules x seeds within a time budget.

A cell is one run. Cells run seed by seed, each seed over every schedule and scenario,
so a short budget still covers every scenario once before it repeats one. Before a
cell starts, the matrix estimates its wall time (the mean of the runs so far of that
setup, else the workload plus a first-run allowance); a cell that would end past the
budget is skipped and listed as such. A cell still running at the deadline is cut
there (its workload stopped, or its Spark analysis stopped) and listed as cut, with
its run folder: a budget is a deadline, which one slow analysis used to overrun by
many minutes.

Fault schedules:
- `own`: the scenario's schedule as written (its run folder keeps the scenario's name);
- `none`: no faults at all (the control: which anomalies come from the design alone);
- `latency`: the scenario's schedule plus 100 ms +- 30 ms on the app's link to its
  first store for the middle half of the workload (scenarios without a store link
  have no such cell).
A variant runs as `<scenario>+<schedule>` so the suite page keeps its runs apart.

Only a forbidden anomaly (an `absent` expectation found) fails a cell: a predicted
anomaly that a variant schedule does not produce is a finding, not a failure.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from driftlab.checkers.verdict import UNEXPECTED
from driftlab.harness.app.judge import WarmSpark
from driftlab.harness.app.outcome import Outcome, outcome_of
from driftlab.harness.app.run import check_scenario, run_scenario
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.nemesis.schedule import FaultSpec, Schedule
from driftlab.harness.lab.scenario import Scenario
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.scenarios.catalogue.architectures import setup_services

SCHEDULES = ("own", "none", "latency")
FIRST_RUN_ALLOWANCE_S = 90.0  # services to start and a Spark session to warm, once
LATENCY_STORES = ("postgres", "redis", "rabbitmq")


@dataclass(frozen=True)
class Cell:
    """One run of the matrix."""

    scenario: Scenario
    schedule: str
    seed: int

    @property
    def name(self) -> str:
        """The run's scenario name: the scenario's own, or `<scenario>+<schedule>`."""
        return self.scenario.name

    def rerun(self, base: str) -> str:
        """The command that repeats this cell alone."""
        return (
            f"driftlab matrix --scenarios {base} --schedules {self.schedule} "
            f"--seeds {self.seed}-{self.seed} --duration {self.scenario.workload.duration:g}s"
        )


@dataclass
class MatrixResult:
    """What the matrix ran, what it skipped for the budget, and its wall time."""

    outcomes: list[tuple[Cell, Outcome]] = field(default_factory=list)
    skipped: list[Cell] = field(default_factory=list)
    cut: list[tuple[Cell, Outcome]] = field(default_factory=list)  # stopped at the deadline
    wall_s: float = 0.0
    interrupted: bool = False

    @property
    def forbidden(self) -> list[Outcome]:
        """Runs with a forbidden anomaly, or failed for what they found (a pipeline's
        store that did not converge): the matrix's failures."""
        return [o for _, o in self.outcomes if o.result.verdict == UNEXPECTED or _judged(o)]

    @property
    def exit_code(self) -> int:
        """130 interrupted, 1 a forbidden anomaly, 3 a run that could not complete, else 0."""
        if self.interrupted:
            return exitcodes.INTERRUPTED
        if self.forbidden:
            return exitcodes.VERDICT
        return exitcodes.LAB_FAILED if self.errors else exitcodes.OK

    @property
    def errors(self) -> list[Outcome]:
        """Runs that could not complete (no verdict)."""
        return [
            o
            for _, o in self.outcomes
            if o.result.error
            and o.result.exit_code not in (exitcodes.INTERRUPTED, exitcodes.VERDICT)
        ]


def _judged(o: Outcome) -> bool:
    """A run that failed with a reason about the system under test, not the lab."""
    return o.result.error is not None and o.result.exit_code == exitcodes.VERDICT


def with_schedule(sc: Scenario, schedule: str) -> Scenario | None:
    """`sc` under the named fault schedule, or None when it has no such variant."""
    if schedule == "own":
        return sc
    if schedule == "none":
        summary = (
            f"{sc.name} with no fault at all, the matrix's control: which anomalies its "
            "design makes by itself. Its predictions are for its own faults: one it does "
            "not show here is a finding, not a failure."
        )
        return dataclasses.replace(
            sc, name=f"{sc.name}+none", faults=Schedule((), 0.0), summary=summary
        )
    if schedule == "latency":
        stores = [s for s in setup_services(sc) if s in LATENCY_STORES]
        if not stores:
            return None
        d = sc.workload.duration
        window = FaultSpec(
            "latency", stores[0], at=0.25 * d, duration=0.5 * d, params={"ms": 100, "jitter_ms": 30}
        )
        faults = Schedule((*sc.faults.faults, window), sc.faults.recovery)
        summary = (
            f"{sc.name} with its own faults and 100 ms +- 30 ms of latency on the link to "
            f"{stores[0]} for the middle half of the workload. {sc.summary}"
        )
        return dataclasses.replace(
            sc, name=f"{sc.name}+latency", faults=faults.fitted(d), summary=summary
        )
    raise ValueError(f"unknown fault schedule {schedule!r}; choose from {', '.join(SCHEDULES)}")


def plan(scenarios: list[Scenario], schedules: list[str], seeds: list[int]) -> list[Cell]:
    """Every cell, seed-major then schedule then scenario (see the module)."""
    for s in schedules:
        if s not in SCHEDULES:
            raise ValueError(f"unknown fault schedule {s!r}; choose from {', '.join(SCHEDULES)}")
    cells = []
    for seed in seeds:
        for schedule in schedules:
            for sc in scenarios:
                variant = with_schedule(sc, schedule)
                if variant is not None:
                    check_scenario(variant)
                    cells.append(Cell(variant, schedule, seed))
    return cells


def parse_seeds(text: str) -> list[int]:
    """`3` (a count: seeds 0..2), `1,5,9` (or `7,` for seed 7 alone) or `0-4`; ValueError
    naming the forms otherwise."""
    text = text.strip()
    try:
        if "," in text:
            return [int(s) for s in text.split(",") if s.strip()]
        if "-" in text[1:]:
            lo, hi = text.split("-", 1)
            seeds = list(range(int(lo), int(hi) + 1))
        else:
            seeds = list(range(int(text)))
    except ValueError:
        seeds = []
    if not seeds:
        raise ValueError(
            f"--seeds {text!r}: write a count N for seeds 0..N-1 (3 = seeds 0,1,2), a list "
            "(1,5,9; one seed: 7,) or a range (0-4)"
        )
    return seeds


def run_matrix(
    cells: list[Cell],
    budget_s: float,
    runs_dir: Path,
    stack: ServiceStack,
    spark_master: str | None = None,
    on_result: Callable[[Cell, Outcome], None] | None = None,
    stop: threading.Event | None = None,
    server: WarmSpark | None = None,
) -> MatrixResult:
    """Run `cells` on `stack` until the budget would be exceeded, cutting a cell still
    running at the deadline; never raises for a failed run (it is an outcome with an
    error). `stop`, set from another thread, cuts the current run short (interrupted).
    `server`: the stack's warm analysis server, which judges the runs while it answers
    (driftlab.harness.app.judge.warm_spark)."""
    result = MatrixResult()
    started = time.monotonic()
    deadline = started + budget_s
    walls: dict[str, list[float]] = {}
    # A pipeline file's cells are repeated from the file (its scenario is registered
    # only while the matrix runs).
    base_of = {
        c.scenario.name: c.scenario.setup_params.get("pipeline_file")
        or c.scenario.name.split("+", 1)[0]
        for c in cells
    }
    # What every cell runs with; each adds its seed, its stop and its phase tick.
    run_cell = functools.partial(
        run_scenario, runs_dir=runs_dir, spark_master=spark_master, server=server, stack=stack
    )
    for i, cell in enumerate(cells):
        if result.interrupted:
            break
        if time.monotonic() - started + _estimate(cell, walls) > budget_s:
            result.skipped = cells[i:]
            break
        run_stop = stop or threading.Event()
        hit = threading.Event()
        phase = [""]  # the run's phase, from its tick: Spark is stopped only in "analyze"
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), _cut, (run_stop, hit, phase))
        timer.daemon = True
        timer.start()
        try:
            run = run_cell(
                cell.scenario,
                seed=cell.seed,
                stop=run_stop,
                tick=functools.partial(_note_phase, phase),
            )
        finally:
            timer.cancel()
        walls.setdefault(cell.scenario.setup, []).append(run.wall_s)
        outcome = outcome_of(run, cell.scenario, duration=cell.scenario.workload.duration)
        if cell.schedule != "own" or "pipeline_file" in cell.scenario.setup_params:
            outcome = dataclasses.replace(outcome, rerun=cell.rerun(base_of[cell.name]))
        if hit.is_set():
            # A run that ended just as the deadline came is a run like any other.
            done = run.verdict is not None and not run.interrupted and run.error is None
            (result.outcomes if done else result.cut).append((cell, outcome))
            result.skipped = cells[i + 1 :]
            break
        result.outcomes.append((cell, outcome))
        if on_result:
            on_result(cell, outcome)
        if run.exit_code == exitcodes.INTERRUPTED:
            result.interrupted = True
    result.wall_s = time.monotonic() - started
    return result


def _note_phase(phase: list[str], now: str, *_: object) -> None:
    """A runner tick that keeps only the phase."""
    phase[0] = now


def _cut(run_stop: threading.Event, hit: threading.Event, phase: list[str]) -> None:
    """At the deadline: stop the running cell, in its workload (the runner's stop event)
    or in its analysis (the Spark session, whose jobs then fail at once)."""
    hit.set()
    run_stop.set()
    if phase[0] == "analyze":
        from driftlab.checkers.session import stop_spark

        stop_spark()


def _estimate(cell: Cell, walls: dict[str, list[float]]) -> float:
    seen = walls.get(cell.scenario.setup)
    if seen:
        return sum(seen) / len(seen)
    return (
        cell.scenario.workload.duration
        + cell.scenario.quiesce_timeout / 2
        + (FIRST_RUN_ALLOWANCE_S)
    )
