"""How a run hears SIGINT and SIGTERM, in every phase.

During the workload the first signal only sets `stop`: the driver stops, every fault is
healed and the history closes without its END mark. In every other phase (setup,
convergence wait, analysis, report) there is nothing to heal, so the signal raises
KeyboardInterrupt at once where the main thread is; so does a second signal during the
workload. Both signals are heard even when the command inherited SIGINT ignored (a
background job started from a script): an ignored SIGINT once let an analysis run on.
Python runs a handler wherever the main thread is, a finalizer (`__del__`) included,
and ignores what a finalizer raises: a signal heard there once let a run finish as if
never interrupted, so a KeyboardInterrupt a finalizer swallowed is raised again when the
block it was meant for ends (its `stop` set meanwhile, as for any signal).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from driftlab.harness.history import uninterrupted

PHASES = {
    "stack": "setup",
    "workload": "workload",
    "quiesce": "convergence wait",
    "analyze": "analysis",
    "report": "report",
}
"""The lifecycle's phases (driftlab.harness.lab.runner.lifecycle's `on_phase`, and the judge's and
the report's) as the interrupted line and logs/run.json's `interrupted_in` say them."""


class RunSignals:
    """SIGINT and SIGTERM while `installed`: `stop` set, and KeyboardInterrupt raised
    unless the run is in its workload and this is the first signal."""

    def __init__(self, stop: threading.Event | None = None, phase: str = "setup") -> None:
        self.stop = stop or threading.Event()
        self.phase = phase
        self.interrupted_in: str | None = None  # the phase the first signal came in
        self._old: dict[int, Any] = {}
        self._raised = False  # a KeyboardInterrupt raised
        self._lost: list[bool] = []  # ... and ignored in a finalizer, none raised since

    def enter(self, phase: str) -> None:
        """The run entered `phase` (a key of PHASES, or already its name)."""
        self.phase = PHASES.get(phase, phase)

    def _handle(self, signum: int, _frame: Any) -> None:
        first = self.interrupted_in is None
        if first:
            self.interrupted_in = self.phase
        self.stop.set()
        if first and self.phase == "workload":
            return
        if uninterrupted.in_progress():
            uninterrupted.postpone()  # raised once the process launched is recorded
            return
        self._raised = True
        self._lost.clear()
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[RunSignals]:
        """The handler in place for the block, the previous ones restored after it;
        nothing outside the main thread, which signals never reach (its caller stops
        the run through `stop`)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        try:
            with uninterrupted.finalizer_interrupts(lambda: self._raised) as self._lost:
                yield self
            if self._lost:
                raise KeyboardInterrupt
        finally:
            for sig, old in self._old.items():
                signal.signal(sig, old)


def interrupting(phase: str) -> contextlib.AbstractContextManager[RunSignals]:
    """SIGINT and SIGTERM raise KeyboardInterrupt during the block (a command's own
    steps around its runs, a run's report): its `interrupted_in` says `phase`."""
    return RunSignals(phase=PHASES.get(phase, phase)).installed()
