"""Replay an explored schedule on the real stack, into a normal run directory.

    schedule.json -> run folder (config.json names the schedule) -> lifecycle.execute
    with a driver that forces every step through the turnstile
    (driftlab.harness.lab.runner.lifecycle)

The run is then judged like any other (the CLI runs the Spark analysis); `compare`
says whether it shows the anomaly kinds the simulator saved in the schedule.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Required, TypedDict

from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.explore.schedule import Action, Schedule, describe
from driftlab.harness.lab.explore.spec import SetupSpec
from driftlab.harness.lab.replay.driver import ReplayDriver
from driftlab.harness.lab.replay.turnstile import ReplayError, Turnstile
from driftlab.harness.lab.runner.lifecycle import RunPlan, execute, run_log
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.harness.lab.setups.base import SetupContext

log = logging.getLogger("driftlab.replay")

QUIESCE_TIMEOUT = 120.0


@dataclass
class Comparison:
    """The anomaly kinds of the simulation against those of the real run."""

    expected: set[str]
    found: set[str]
    missing: list[str] = field(default_factory=list)  # simulated, not seen for real
    extra: list[str] = field(default_factory=list)  # seen for real, not simulated

    @property
    def same(self) -> bool:
        """True when the real run shows exactly the simulated kinds."""
        return not self.missing and not self.extra


def compare(schedule: Schedule, found: Iterable[str]) -> Comparison:
    """Compare the kinds saved in `schedule` with the kinds `found` on the real stack."""
    expected = {a["kind"] for a in schedule.anomalies}
    seen = set(found)
    return Comparison(expected, seen, sorted(expected - seen), sorted(seen - expected))


def scenario_name(schedule: Schedule) -> str:
    """The run folder's scenario name: `replay-<setup>`."""
    return f"replay-{schedule.setup}"


def check_replayable(schedule: Schedule, spec: SetupSpec) -> None:
    """Raise ReplayError, naming the fix, when the schedule cannot be replayed on the
    simulated setup `spec`: a step its simulator never takes, or no final quiesce."""
    if not schedule.steps or schedule.steps[-1].action != Action.QUIESCE:
        raise ReplayError(
            "the schedule does not end with `quiesce`: replay an executed schedule as "
            "`driftlab explore` saves it"
        )
    moves = {m.action: m for m in spec.moves}
    for i, step in enumerate(schedule.steps[:-1], start=1):
        move = moves.get(step.action)
        if move is None or (move.actors and step.actor not in move.actors):
            allowed = "; ".join(
                f"{m.action} ({', '.join(m.actors) or 'no actor'})" for m in moves.values()
            )
            raise ReplayError(
                f"step {i} ({describe(step)}) is no move of {schedule.setup}, whose steps are: "
                f"{allowed}; fix the step or replay the schedule `driftlab explore` saved"
            )


class ReplayOptions(TypedDict, total=False):
    """The options of `replay_schedule` past the schedule and what replays it, for
    callers that pass them on."""

    runs_dir: Required[Path]
    seed: int
    source: Path | None
    stack: ServiceStack | None
    step_timeout: float


def replay_schedule(
    schedule: Schedule,
    spec: SetupSpec,
    driver_class: type[ReplayDriver],
    *,
    runs_dir: Path,
    seed: int = 0,
    source: Path | None = None,
    stack: ServiceStack | None = None,
    step_timeout: float = 60.0,
) -> Path:
    """Run `schedule`, drawn on the simulated setup `spec`, on the real services
    through a `driver_class` driver and return its run directory (not analysed).

    `stack` is a running stack to use (tests share one); None reuses one started by
    `driftlab up` or starts one for this replay. Raises ReplayError (the history is
    then closed without its END mark) when a step cannot be forced.
    """
    check_replayable(schedule, spec)
    driver = driver_class(Turnstile(step_timeout), schedule.params)
    scenario = scenario_name(schedule)
    run_dir = RunDir.create(runs_dir, scenario, seed)
    plan = RunPlan(
        scenario=scenario,
        seed=seed,
        params={
            # Repeated at the top, as scenarios do: the eventsourcing checker reads it there.
            **({"invariant": driver.params["invariant"]} if "invariant" in driver.params else {}),
            "setup": driver.setup.name,
            "setup_params": driver.params,
        },
        setup_params=dict(driver.params),
        config={
            "schedule": {"path": str(source) if source else None, **_schedule_doc(schedule)},
            "expectations": {a["kind"]: "present" for a in schedule.anomalies},
        },
        quiesce_timeout=QUIESCE_TIMEOUT,
    )
    with run_log(run_dir):
        ex = execute(run_dir, driver.setup, _ScheduleDriver(driver, schedule), plan, stack=stack)
    if ex.error is not None:
        raise ex.error
    if ex.interrupted:
        raise KeyboardInterrupt
    return run_dir.path


class _ScheduleDriver:
    """A lifecycle Driver that forces the schedule's steps, one at a time."""

    def __init__(self, driver: ReplayDriver, schedule: Schedule) -> None:
        self.driver = driver
        self.steps = schedule.steps[:-1]  # the last one is the quiesce
        self.finished = False

    def start(self, ctx: SetupContext) -> None:
        """Start the setup and the turnstile's actors."""
        self.driver.start(ctx)

    def drive(self, stop: threading.Event) -> bool:
        """Force every step in order, then stop the actors (True: stopped early)."""
        for i, step in enumerate(self.steps, start=1):
            if stop.is_set():
                return True
            log.info("step %d: %s", i, step)
            self.driver.step(i, step)
        self.driver.finish()
        self.finished = True
        return False

    def disturbed(self, service: str) -> bool:
        """Never: a replay's steps act on the setup's own processes, not the stack's."""
        return False

    def breakdowns(self) -> list[tuple[float, str, str]]:
        """None: a step the stack will not take is the replay's own error."""
        return []

    def heal(self) -> None:
        """After a failed step: stop the actors without hiding the step's error."""
        if not self.finished:
            with contextlib.suppress(ReplayError):
                self.driver.finish()


def _schedule_doc(schedule: Schedule) -> dict[str, Any]:
    return {
        "setup": schedule.setup,
        "seed": schedule.seed,
        "property": schedule.property,
        "steps": [s.to_dict() for s in schedule.steps],
        "anomalies": schedule.anomalies,
    }
