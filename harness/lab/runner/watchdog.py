"""The lab's watchdog: a run whose lab broke under it proves nothing of the pipeline.

For the whole run, from the setup's start to its final reads, the watchdog looks at the
stack's services the run uses: a service that dies, stops answering, loses its
configuration (Toxiproxy's proxies) or cannot serve though it answers (a Connect
connector's task FAILED, after a restart or none) while no scheduled fault holds it is
a failure of the lab, not an anomaly of the pipeline. It records each as a `LabBreakdown`
(service, seconds since the workload's start, what happened) and stops the run: the
runner then says `lab failed` (exit 3) with one line naming the service and when,
whatever the history shows. A fault that could not be injected or healed is one too
(the nemesis reports it).

Deaths and lost proxies count at once; a silence only after `answer_grace` seconds of
failed probes in a row, so a loaded machine's slow answer is no failure.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from driftlab.harness.lab.runner.periodic import Periodic
from driftlab.harness.lab.services.stack_protocol import ServiceStack

log = logging.getLogger("driftlab.runner")

TOXIPROXY = "toxiproxy"
"""The verdict of a run whose lab failed under it."""


@dataclass(frozen=True, slots=True)
class LabBreakdown:
    """One failure of the lab: run.json's `lab_failures` holds these as objects."""

    service: str
    at: float  # seconds since the workload's start (negative: before it)
    what: str

    def to_json(self) -> dict[str, Any]:
        """The object run.json keeps."""
        return {**asdict(self), "at": round(self.at, 2)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LabBreakdown:
        """Read back one object of run.json's `lab_failures`."""
        return cls(str(data.get("service")), float(data.get("at") or 0.0), str(data.get("what")))

    def when(self) -> str:
        """`at 4.2 s into the workload`, or before it."""
        if self.at < 0:
            return f"{-self.at:.1f} s before the workload started"
        return f"at {self.at:.1f} s into the workload"


def failure_line(breakdowns: list[LabBreakdown]) -> str:
    """The one line a run whose lab failed ends with: the first failure, and how many
    more there were."""
    first = breakdowns[0]
    more = f" (and {len(breakdowns) - 1} more in logs/run.json)" if len(breakdowns) > 1 else ""
    return (
        f"lab failed: {first.service} {first.what} {first.when()}, which no scheduled fault "
        f"did{more}; the history is not judged; check the service's log and bring it back "
        "with `driftlab up` (or `driftlab down` and `driftlab up`)"
    )


class Watchdog:
    """Watches `services` of `stack` (and Toxiproxy's proxies) in a thread of its own.

    `disturbed(service)` says whether a scheduled fault holds the service down now (its
    window is open or being healed); such a service is not judged. `on_failure` is
    called once, at the first failure (the run stops).
    """

    def __init__(
        self,
        stack: ServiceStack,
        services: Iterable[str],
        disturbed: Callable[[str], bool],
        on_failure: Callable[[], None],
        *,
        interval: float = 0.5,
        answer_every: float = 5.0,
        answer_grace: float = 30.0,
        under_test: Iterable[str] = (),
    ) -> None:
        self.stack = stack
        self.under_test = frozenset(under_test)
        self.services = [s for s in dict.fromkeys([*services, TOXIPROXY]) if s in stack.services]
        self.disturbed = disturbed
        self.on_failure = on_failure
        self.answer_every = answer_every
        self.answer_grace = answer_grace
        self.breakdowns: list[LabBreakdown] = []
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._loop = Periodic("lab-watchdog", interval, self._check_logged)
        self._failed: set[str] = set()
        self._silent_since: dict[str, float] = {}
        self._probes: dict[str, Future[bool]] = {}
        self._last_probe: dict[str, float] = {}
        self._broken: dict[str, Future[str | None]] = {}
        self._workload = False
        self._last_broken: dict[str, float] = {}
        # A probe of a frozen server may never return: it must not stall the watch.
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="driftlab-watchdog")

    # --- the clock and the thread ------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds since the workload's start (`workload_started`)."""
        return time.monotonic() - self._t0

    def workload_started(self) -> None:
        """Time 0 of the failures' `at` (before it, they are negative); from now on, what
        a service cannot do though it answers counts too (before it, the setup waits
        for its own connectors and names one that cannot run: a config of the user's)."""
        self._t0 = time.monotonic()
        self._workload = True

    def start(self) -> None:
        """Start watching (the clock starts too, until `workload_started` resets it)."""
        self._t0 = time.monotonic()
        self._loop.start()

    def stop(self) -> None:
        """Stop watching; probes still in flight are left to finish on their own."""
        self._loop.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _check_logged(self) -> None:
        try:
            self.check()
        except Exception:  # the watch itself must never end a run
            log.exception("the lab watchdog's check failed")

    # --- what it records ---------------------------------------------------------------

    def report(self, service: str, what: str, at: float | None = None) -> None:
        """Record a failure of the lab (the first one of each service counts)."""
        with self._lock:
            if service in self._failed:
                return
            self._failed.add(service)
            first = not self.breakdowns
            breakdown = LabBreakdown(service, self.elapsed() if at is None else at, what)
            self.breakdowns.append(breakdown)
        log.error("the lab failed: %s %s %s", service, what, breakdown.when())
        if first:
            self.on_failure()

    def check(self, *, probe: bool = True) -> None:
        """One look at every watched service and at Toxiproxy's proxies; without
        `probe`, at deaths and proxies only (no client round trip is sent)."""
        for name in self.services:
            if name in self._failed:
                continue
            if self.disturbed(name):
                self._silent_since.pop(name, None)
                continue
            service = self.stack.services[name]
            if not service.is_running():
                # A fault being healed right now may have restarted it meanwhile.
                if not self.disturbed(name) and not service.is_running():
                    self.report(name, "died")
                continue
            if probe:
                self._check_answers(name)
                self._check_broken(name)
        self._check_proxies()

    def _check_answers(self, name: str) -> None:
        now = time.monotonic()
        probe = self._probes.get(name)
        if probe is not None and probe.done():
            del self._probes[name]
            answered = not probe.exception() and bool(probe.result())
            if answered or self.disturbed(name):
                self._silent_since.pop(name, None)
            else:
                self._silent_since.setdefault(name, self._last_probe[name])
        elif probe is not None:  # still waiting: silent since it was sent
            self._silent_since.setdefault(name, self._last_probe[name])
        silent = self._silent_since.get(name)
        if silent is not None and now - silent >= self.answer_grace:
            self.report(name, f"stopped answering (no reply for {now - silent:.0f} s)",
                        at=silent - self._t0)  # fmt: skip
            return
        if name not in self._probes and now - self._last_probe.get(name, 0.0) >= self.answer_every:
            self._last_probe[name] = now
            self._probes[name] = self._pool.submit(self.stack.services[name].answers)

    def _check_broken(self, name: str) -> None:
        """A service that runs but cannot serve the run (a connector's task FAILED),
        asked as often as the probes and in the same pool, once the workload runs. A
        service `under_test` (a pipeline file's own connectors) is left to the verdict."""
        if not self._workload or name in self.under_test:
            return
        asked = self._broken.get(name)
        if asked is not None and asked.done():
            del self._broken[name]
            what = None if asked.exception() else asked.result()
            if what and not self.disturbed(name):
                self.report(name, what)
                return
        now = time.monotonic()
        if name not in self._broken and now - self._last_broken.get(name, 0.0) >= self.answer_every:
            self._last_broken[name] = now
            self._broken[name] = self._pool.submit(self.stack.services[name].broken)

    def _check_proxies(self) -> None:
        if TOXIPROXY not in self.services or TOXIPROXY in self._failed:
            return
        if self.disturbed(TOXIPROXY) or not self.stack.services[TOXIPROXY].is_running():
            return
        try:
            lost = self.stack.links.missing()
        except Exception:  # not answering: the probes judge that
            return
        if lost and not self.disturbed(TOXIPROXY):
            self.report(TOXIPROXY, f"lost its proxies {', '.join(lost)}")
