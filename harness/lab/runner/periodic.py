"""A call repeated on a thread of its own until it is stopped: the loop of the lab's
watchdog and of a pipeline's store observer."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Periodic:
    """Calls `tick` every `interval` seconds on a daemon thread named `name`, from
    `start` until `stop` (the first call one interval after `start`)."""

    def __init__(self, name: str, interval: float, tick: Callable[[], None]) -> None:
        self.name = name
        self.interval = interval
        self.tick = tick
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start calling `tick`."""
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop calling `tick`; a call in flight is waited for, up to `timeout` seconds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()
