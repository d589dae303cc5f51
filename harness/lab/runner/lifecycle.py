"""The one lifecycle of a run, a workload run and a replay alike (Jepsen's `run!`).

    execute(run_dir, setup, driver, plan):
        config.json (versions, start time) -> recorder -> stack (the caller's, a running
        `driftlab up` stack, or one of its own) -> every link healed, leftovers removed,
        lease -> setup prepared under a fresh namespace -> driver.start, driver.drive
        (operations and faults) -> driver.heal -> quiesce -> final reads of every store
        as `state` events -> END mark

What drives the run between prepare and quiesce is the `Driver`: the workload with its
nemesis (driftlab.harness.lab.runner.workload_driver) or a replayed schedule
(driftlab.harness.lab.replay). The
lifecycle never raises for a failed run: `Execution` says how far it got and why it
stopped, and a history without its END mark tells readers it was cut short.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from driftlab.harness.history.exitcodes import BadInput, LabFailure
from driftlab.harness.history.logfile import log_to
from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.history.schema import Mark, RunHeader
from driftlab.harness.lab.runner.clean_stack import clean, run_lease
from driftlab.harness.lab.runner.stack_use import (
    acquire_stack,
    service_logs,
    stack_line,
    stack_used,
)
from driftlab.harness.lab.runner.watchdog import LabBreakdown, Watchdog, failure_line
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.harness.lab.services.versions import component_versions
from driftlab.harness.lab.setups.base import Setup, SetupContext, namespace_for

log = logging.getLogger("driftlab.runner")

Phase = Callable[[str], None]
"""`on_phase(name)`: the lifecycle entered `stack`, `workload` or `quiesce` (for the
terminal, and for how a signal is heard: driftlab.harness.lab.runner.signals)."""


class Driver(Protocol):
    """What runs between a prepared setup and its quiesce."""

    def start(self, ctx: SetupContext) -> None:
        """Start the prepared setup's background work and the driver's own."""

    def drive(self, stop: threading.Event) -> bool:
        """Run every operation and fault; True when `stop` cut the run short."""

    def heal(self) -> None:
        """End every fault and actor, also after a failure (called once, always)."""

    def disturbed(self, service: str) -> bool:
        """Whether a fault of the driver's holds the stack's `service` down now."""

    def breakdowns(self) -> list[tuple[float, str, str]]:
        """Faults that could not be injected or healed: (seconds since the workload's
        start, service, what)."""


@dataclass(frozen=True)
class RunPlan:
    """What a run is: its name, seed, parameters and the rest of its config.json."""

    scenario: str
    seed: int
    params: dict[str, Any]  # the history header's and config.json's `params`
    setup_params: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)  # more config.json fields
    quiesce_timeout: float = 120.0


@dataclass
class Execution:
    """How far a run got: interrupted, quiesced, complete (END mark), or failed."""

    interrupted: bool = False
    quiesced: bool = False
    completed: bool = False  # every store read: the history has its END mark
    error: Exception | None = None
    recorder_failure: BaseException | None = None  # the history could not grow (disk)
    lab_failures: list[LabBreakdown] = field(default_factory=list)  # the watchdog's
    stack: dict[str, Any] | None = None  # which stack the run used (stack_use.stack_used)


def execute(
    run_dir: RunDir,
    setup: Setup,
    driver: Driver,
    plan: RunPlan,
    *,
    stack: ServiceStack | None = None,
    stop: threading.Event | None = None,
    on_phase: Phase | None = None,
) -> Execution:
    """Run `setup` driven by `driver` into `run_dir`; never raises for a failed run.

    `stack` is a running stack to use (the suite shares one); None reuses one started
    by `driftlab up` or starts one for this run. `stop` cuts the run short (a signal, a
    deadline): the driver stops, every fault is healed, the history closes without END.
    """
    stop = stop or threading.Event()
    run_dir.write_config(
        {
            **plan.config,
            "scenario": plan.scenario,
            "seed": plan.seed,
            "run_id": run_dir.run_id,
            "params": plan.params,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "versions": component_versions(setup.services),
        }
    )
    header = RunHeader(run_dir.run_id, plan.scenario, plan.seed, params=plan.params)
    rec = Recorder(run_dir, header)
    ex = Execution()
    try:
        _run(run_dir, setup, driver, plan, rec, stack, stop, on_phase or _quiet, ex)
        # A stop during the quiesce or the final reads also cuts the run short.
        ex.interrupted = ex.interrupted or (stop.is_set() and not ex.lab_failures)
    except KeyboardInterrupt:
        ex.interrupted = True
    except Exception as exc:
        log.exception("run %s failed", run_dir.run_id)
        ex.error = exc
    finally:
        if ex.lab_failures:
            # The lab broke first: whatever failed after (a teardown that could not
            # reach a dead service) follows from it.
            ex.error = LabFailure(failure_line(ex.lab_failures))
            ex.interrupted = False
        if ex.completed and not ex.interrupted and ex.error is None and rec.failure is None:
            rec.end()
        else:
            rec.close()  # no END mark: readers see a history cut short
        ex.recorder_failure = rec.failure
    return ex


def _quiet(_phase: str) -> None:
    """No terminal to tell."""


def _run(
    run_dir: RunDir,
    setup: Setup,
    driver: Driver,
    plan: RunPlan,
    rec: Recorder,
    stack: ServiceStack | None,
    stop: threading.Event,
    on_phase: Phase,
    ex: Execution,
) -> None:
    on_phase("stack")
    with (
        acquire_stack(setup.services, stack) as live,
        service_logs(live, setup.services, run_dir.logs),
        contextlib.ExitStack() as scope,
    ):
        ex.stack = stack_used(live)
        log.info("%s", stack_line(ex.stack))
        ctx = SetupContext(
            namespace=namespace_for(plan.scenario),
            stack=live,
            recorder=rec,
            work_dir=run_dir.path,
            params=dict(plan.setup_params),
            seed=plan.seed,
        )
        log.info("namespace %s", ctx.namespace)
        if isinstance(live, Stack):
            # The lease first: of two runs started together, the second stops here.
            scope.enter_context(run_lease(live, ctx.namespace))
            for line in clean(live, own=ctx.namespace).lines():
                log.warning("stack: removed %s", line)
            log.info("stack: every link healed and free of toxics, no leftovers")
        watchdog = Watchdog(
            live, setup.services, driver.disturbed, stop.set, under_test=setup.under_test
        )
        watchdog.start()
        scope.callback(_stop_watching, watchdog, driver, ex)
        try:
            setup.prepare(ctx)
        except ValueError as exc:
            # Setups check their parameters here: the scenario's input, not the lab.
            raise BadInput(str(exc)) from exc
        # Torn down however the run ends: a run whose consumers failed to start once
        # left its connector and replication slot behind.
        scope.callback(setup.teardown)
        try:
            driver.start(ctx)
            watchdog.workload_started()
            # From here a first signal stops the workload and heals its faults; until
            # here (processes getting ready) it stops the run at once.
            on_phase("workload")
            ex.interrupted = driver.drive(stop)
            rec.mark(Mark.WORKLOAD_DONE)
        finally:
            # Heal even when the run failed: no fault may outlive its run.
            driver.heal()
            rec.mark(Mark.HEALED)
        if watchdog.breakdowns or driver.breakdowns():
            return  # the lab failed under the run: nothing after this would count
        # A signal while the faults healed: no convergence wait to sit through.
        ex.interrupted = ex.interrupted or stop.is_set()
        if ex.interrupted:
            return
        on_phase("quiesce")
        ex.quiesced = setup.quiesce(plan.quiesce_timeout)
        if ex.quiesced:
            rec.mark(Mark.QUIESCED)
        else:
            log.warning("not quiesced within %.0f s", plan.quiesce_timeout)
        for store, items in setup.final_states().items():
            if not items:
                # A store read empty still says so: without it the divergence checker
                # cannot tell an empty store from one never read.
                rec.state(store, None, None)
            for key, (value, version) in sorted(items.items()):
                rec.state(store, key, value, version=version)
        ex.completed = True


def _stop_watching(watchdog: Watchdog, driver: Driver, ex: Execution) -> None:
    """End the watch (before the setup's teardown and the stack's stop) and keep what
    it saw, with the faults the driver could not inject or heal."""
    watchdog.stop()
    # One last look: a service whose death made the run fail just now (its client's
    # error, often without a word, ended the run) is named as what failed.
    with contextlib.suppress(Exception):
        watchdog.check(probe=False)
    for at, service, what in driver.breakdowns():
        watchdog.report(service, what, at=at)
    ex.lab_failures = list(watchdog.breakdowns)


def run_log(run_dir: RunDir) -> contextlib.AbstractContextManager[None]:
    """Send the harness's log records to logs/runner.log for the run's duration."""
    return log_to(run_dir.runner_log)
