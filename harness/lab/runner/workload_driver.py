"""The driver of a scenario run: the workload's clients and the nemesis's fault schedule,
concurrently, until the workload's duration is over or the run is stopped."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from driftlab.harness.history.schema import Mark
from driftlab.harness.lab.nemesis import Nemesis
from driftlab.harness.lab.scenario import Scenario
from driftlab.harness.lab.setups.base import Setup, SetupContext
from driftlab.harness.lab.workload import Workload, WorkloadStats

log = logging.getLogger("driftlab.runner")

STRAGGLERS_S = 5.0
"""How long a stopped run waits for its clients to finish the operation they are in."""

CLIENTS_LEFT = threading.Event()
"""Set once a stopped run of this process left clients inside a call. Their threads hold
native clients (librdkafka's): the interpreter's finalization frees those under them, and
a run once died of SIGSEGV after its verdict was written. The command then ends without
finalization (`driftlab.harness.cli.main`)."""

Tick = Callable[[str, float, WorkloadStats], None]
"""`tick(phase, elapsed_s, stats)`: progress for the terminal."""


class WorkloadDriver:
    """Runs `scenario`'s workload and faults against a prepared `setup` (a lifecycle
    Driver); its figures (stats, fault windows and errors) stay for the summary."""

    def __init__(self, scenario: Scenario, setup: Setup, seed: int, tick: Tick | None) -> None:
        self.scenario = scenario
        self.setup = setup
        self.seed = seed
        self.tick = tick
        self.stats = WorkloadStats()
        self.fault_windows = 0
        self.fault_errors: list[str] = []
        self._workload: Workload | None = None
        self._nemesis: Nemesis | None = None
        self._ctx: SetupContext | None = None

    def start(self, ctx: SetupContext) -> None:
        """Start the setup, then the nemesis's clock and the clients together."""
        self._ctx = ctx
        self._workload = Workload(self.scenario.workload, self.setup, self.seed)
        faults = self.scenario.faults
        self._nemesis = Nemesis(
            faults, self.setup, ctx, ends_at=self.scenario.workload.duration - faults.recovery
        )
        self.setup.start()
        self._workload.prepare()
        # Time 0 of the fault schedule, on the history's clock: the report puts the
        # planned and the observed fault windows on one clock with it.
        ctx.recorder.mark(Mark.WORKLOAD_START)
        self._nemesis.start()
        self._workload.start()

    def drive(self, stop: threading.Event) -> bool:
        """Wait for the workload (its duration) or `stop`; True when stopped early."""
        workload = self._workload
        assert workload is not None and self._ctx is not None
        recorder = self._ctx.recorder
        stopped = False
        t0 = time.monotonic()
        while workload.alive():
            # Back as soon as the clients end (their duration: a run must not idle a
            # poll past it), else every quarter second for the checks below.
            workload.join(timeout=0.25)
            if stop.is_set():
                stopped = True
                workload.stop()
                break
            if recorder.failure is not None:
                workload.stop()  # the history cannot grow: the rest would be unjudged
                break
            if self.tick:
                self.tick("workload", time.monotonic() - t0, workload.stats)
        # Stopped (a signal, or a service the lab lost): a client stuck in a call to a
        # dead broker is left behind after STRAGGLERS_S, not waited on for its
        # timeouts (a run once ended a minute after Kafka died).
        self.stats = workload.join(timeout=STRAGGLERS_S if stopped else 60)
        if stopped and workload.alive():
            log.warning("clients still in an operation %.0f s after the stop: left", STRAGGLERS_S)
            CLIENTS_LEFT.set()
        return stopped

    def disturbed(self, service: str) -> bool:
        """Whether a scheduled fault holds the stack's `service` down now."""
        return self._nemesis is not None and self._nemesis.disturbed(service)

    def breakdowns(self) -> list[tuple[float, str, str]]:
        """Faults that could not be injected or healed: (seconds since the workload's
        start, service, what)."""
        return list(self._nemesis.failures) if self._nemesis is not None else []

    def heal(self) -> None:
        """Close every fault window still open (also after a failure)."""
        if self._nemesis is None:
            return
        self._nemesis.heal_all()
        self.fault_windows = self._nemesis.windows
        self.fault_errors = self._nemesis.errors
