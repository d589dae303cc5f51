"""The moments of a run that faults may wait for, as they happen.

The setup and its observer report what the pipeline does (a process became ready, a
write was acknowledged, a store's observed lag); the nemesis reports its own windows.
`Moments` keeps every report with its time so that a fault waiting for one that has
already happened (a process's first start, before the workload) still finds it.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Moment:
    """One report: `event` of `subject` at `t` (time.monotonic()), with a `value` (a
    lag in seconds; 1 otherwise)."""

    event: str
    subject: str
    t: float
    value: float = 1.0


class Moments:
    """Every moment of one run, in order, shared between the threads that report
    them and the faults that wait for them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._log: dict[tuple[str, str], list[Moment]] = defaultdict(list)

    def emit(self, event: str, subject: str = "", value: float = 1.0) -> None:
        """Report `event` of `subject` now."""
        with self._cond:
            self._log[(event, subject)].append(Moment(event, subject, time.monotonic(), value))
            self._cond.notify_all()

    def count(self, event: str, subject: str = "") -> int:
        """How many times `event` of `subject` was reported so far."""
        with self._cond:
            return len(self._log.get((event, subject), ()))

    def wait(
        self,
        event: str,
        subject: str,
        find: Callable[[list[Moment]], float | None],
        deadline: float,
        stop: threading.Event,
    ) -> float | None:
        """Wait until `find`, given the reports of `event` of `subject` so far, returns
        the time of the awaited moment; None when `deadline` (time.monotonic()) or
        `stop` comes first."""
        with self._cond:
            while True:
                found = find(list(self._log.get((event, subject), ())))
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or stop.is_set():
                    return None
                # Short waits: `stop` is an Event of its own, not this condition.
                self._cond.wait(min(left, 0.05))
