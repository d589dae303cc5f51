"""Replay an explored schedule on the real stack, into a normal run directory.

    schedule.json -> run folder (config.json names the schedule) -> recorder -> stack ->
    real setup under a fresh namespace -> every step forced through the turnstile ->
    workload-done, healed -> quiesce -> final `state` of every store -> END mark

The run is then judged like any other (the CLI runs the Spark analysis); `compare`
says whether it shows the anomaly kinds the simulator saved in the schedule.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.explore.schedule import Action, Schedule
from harness.history.recorder import Recorder
from harness.history.schema import Mark, RunHeader
from harness.replay.drivers import DRIVERS
from harness.replay.turnstile import ReplayError, Turnstile
from harness.rundir import RunDir
from harness.runner.clean_stack import clean, run_lease
from harness.runner.stack_use import acquire_stack, service_logs
from harness.services.stack import Stack
from harness.setups.base import SetupContext, namespace_for
from reports.versions import component_versions

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


def check_replayable(schedule: Schedule) -> None:
    """Raise ReplayError, naming the fix, when the schedule cannot be replayed."""
    if schedule.setup not in DRIVERS:
        raise ReplayError(
            f"setup {schedule.setup!r} has no replay yet; replayable setups: "
            f"{', '.join(DRIVERS)} (explore one of them with `driftlab explore SETUP`)"
        )
    if not schedule.steps or schedule.steps[-1].action != Action.QUIESCE:
        raise ReplayError(
            "the schedule does not end with `quiesce`: replay an executed schedule as "
            "`driftlab explore` saves it"
        )


def replay(
    schedule: Schedule,
    *,
    runs_dir: Path,
    seed: int = 0,
    source: Path | None = None,
    stack: Any = None,
    step_timeout: float = 60.0,
) -> Path:
    """Run `schedule` on the real services and return its run directory (not analysed).

    `stack` is a running stack to use (tests share one); None reuses one started by
    `driftlab up` or starts one for this replay. Raises ReplayError (the history is
    then closed without its END mark) when a step cannot be forced.
    """
    check_replayable(schedule)
    turnstile = Turnstile(step_timeout)
    driver = DRIVERS[schedule.setup](turnstile, schedule.params)
    scenario = scenario_name(schedule)
    run_dir = RunDir.create(runs_dir, scenario, seed)
    run_id = run_dir.run_id
    params = {"setup": driver.setup.name, "setup_params": driver.params}
    run_dir.write_config(
        {
            "scenario": scenario,
            "seed": seed,
            "run_id": run_id,
            "params": params,
            "schedule": {"path": str(source) if source else None, **_schedule_doc(schedule)},
            "expectations": {a["kind"]: "present" for a in schedule.anomalies},
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "versions": component_versions(driver.setup.services),
        },
    )
    rec = Recorder(run_dir, RunHeader(run_id, scenario, seed, params=params))
    completed = False
    try:
        with (
            acquire_stack(driver.setup.services, stack) as live,
            service_logs(live, driver.setup.services, run_dir.logs),
            contextlib.ExitStack() as scope,
        ):
            ctx = SetupContext(
                namespace=namespace_for(scenario),
                stack=live,
                recorder=rec,
                work_dir=run_dir.path,
                params=dict(driver.params),
                seed=seed,
            )
            if isinstance(live, Stack):
                # A replay is a run like any other: from a clean stack (runner.clean_stack).
                for line in clean(live).lines():
                    log.warning("stack: removed %s", line)
                scope.enter_context(run_lease(live, ctx.namespace))
            try:
                driver.prepare(ctx)
                for i, step in enumerate(schedule.steps[:-1], start=1):
                    log.info("step %d: %s", i, step)
                    driver.step(i, step)
                driver.finish()
                rec.mark(Mark.WORKLOAD_DONE)
                rec.mark(Mark.HEALED)
                if driver.setup.quiesce(QUIESCE_TIMEOUT):
                    rec.mark(Mark.QUIESCED)
                for store, items in driver.setup.final_states().items():
                    if not items:
                        # A store read empty still says so, as in the simulator: without
                        # it the divergence checker cannot tell an empty cache from none.
                        rec.state(store, None, None)  # type: ignore[arg-type]
                    for key, (value, version) in sorted(items.items()):
                        rec.state(store, key, value, version=version)
                completed = True
            finally:
                # Already done on success; after a failure it must not hide the cause.
                with contextlib.suppress(ReplayError):
                    driver.finish()
                driver.setup.teardown()
    finally:
        if completed:
            rec.end()
        else:
            rec.close()  # no END mark: readers see a replay cut short
    return run_dir.path


def _schedule_doc(schedule: Schedule) -> dict[str, Any]:
    return {
        "setup": schedule.setup,
        "seed": schedule.seed,
        "property": schedule.property,
        "steps": [s.to_dict() for s in schedule.steps],
        "anomalies": schedule.anomalies,
    }
