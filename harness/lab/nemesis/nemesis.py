"""The nemesis: opens and closes the fault windows of a schedule, and heals everything.

Each window is recorded as a `fault` start/stop pair (kind, target, parameters), so the
checkers and the report can put anomalies against the faults around them. `heal_all`
closes whatever is open (the end of the run, Ctrl-C, an error) and is idempotent.

Windows at a time open on one timeline. A window at a moment (`FaultSpec.after`) has a
thread of its own that waits for the moment in the run's `Moments`, then opens it
`at` seconds later; it is clipped to close by `ends_at`, and one whose moment never
comes is recorded as a `fault-unmet` mark.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from driftlab.harness.history.schema import Mark
from driftlab.harness.lab.nemesis import actions
from driftlab.harness.lab.nemesis.schedule import Anchor, FaultSpec, Schedule
from driftlab.harness.lab.services.base import Service
from driftlab.harness.lab.services.connect import ConnectorFailed
from driftlab.harness.lab.setups.base import AppCrash, Setup, SetupContext
from driftlab.harness.lab.setups.moments import Moment

log = logging.getLogger("driftlab.nemesis")


@dataclass
class _Open:
    spec: FaultSpec
    fault_id: str
    undo: actions.Undo
    index: int


class Nemesis:
    """Runs `schedule` against the stack and the setup of one run, in its own thread;
    every window closes by `ends_at` seconds after the start (None: no limit)."""

    def __init__(
        self, schedule: Schedule, setup: Setup, ctx: SetupContext, ends_at: float | None = None
    ) -> None:
        schedule.validate()
        self.schedule = schedule
        self.ends_at = ends_at
        self.setup = setup
        self.ctx = ctx
        self.rec = ctx.recorder
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._open: dict[int, _Open] = {}
        self._thread: threading.Thread | None = None
        self._waiters: list[threading.Thread] = []
        self._quiet = threading.Condition(self._lock)  # a process window closed
        # Process windows per target, from their opening until their heal is done.
        self._held: Counter[str] = Counter()
        self.errors: list[str] = []
        # (seconds since the start, service, what): faults that could not be injected
        # or healed, which make the run's lab failed.
        self.failures: list[tuple[float, str, str]] = []
        self.windows = 0
        self._t0 = time.monotonic()
        self._disturbed: Counter[str] = Counter()

    def disturbed(self, service: str) -> bool:
        """Whether a fault of the schedule holds the stack's `service` down now (its
        window is open, or being healed): the lab's watchdog leaves it alone then."""
        with self._lock:
            return self._disturbed[service] > 0

    def _service_fault(self, spec: FaultSpec) -> str | None:
        """The stack service a crash, pause or restart acts on (None: a link, the
        setup's own process, or another kind)."""
        if spec.kind not in PROCESS_KINDS:
            return None
        return None if self.setup.process(spec.target) is not None else spec.target

    def _failed(self, spec: FaultSpec, what: str) -> None:
        service = "toxiproxy" if spec.kind in LINK_KINDS else spec.target
        self.failures.append((time.monotonic() - self._t0, service, what))

    def start(self) -> None:
        """Start the schedule now (time 0 of its windows)."""
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()
        for i, f in enumerate(self.schedule.faults):
            if f.after is not None:
                waiter = threading.Thread(
                    target=self._run_at_moment, args=(i, f), name=f"nemesis-{i}", daemon=True
                )
                self._waiters.append(waiter)
                waiter.start()

    def stop(self) -> None:
        """Stop opening windows (open ones stay open until `heal_all`)."""
        self._stop.set()
        with self._quiet:
            self._quiet.notify_all()
        for thread in (self._thread, *self._waiters):
            if thread is not None:
                thread.join(timeout=120)

    def heal_all(self) -> None:
        """Close every open window: restart, resume, reconnect, remove toxics."""
        self.stop()
        with self._lock:
            opened = list(self._open.items())
            self._open.clear()
        for _, o in sorted(opened, key=lambda kv: -kv[0]):
            self._close(o)

    def _run(self) -> None:
        # Timeline of (time, order, action, index): closes sort before opens at a tie.
        events: list[tuple[float, int, str, int]] = []
        for i, f in enumerate(self.schedule.faults):
            if f.after is not None:
                continue  # its own thread: _run_at_moment
            events.append((f.at, 1, "open", i))
            if f.duration > 0 or f.kind != "restart":
                events.append((f.until, 0, "close", i))
        events.sort()
        for at, _, action, i in events:
            if self._stop.wait(max(0.0, self._t0 + at - time.monotonic())):
                return
            if action == "open":
                self._open_window(i, self.schedule.faults[i])
            else:
                with self._lock:
                    o = self._open.pop(i, None)
                if o is not None:
                    self._close(o)

    def _run_at_moment(self, index: int, spec: FaultSpec) -> None:
        """Wait for the moment of window `index`, open it `spec.at` seconds later and
        close it after its duration, clipped to `ends_at`."""
        assert spec.after is not None
        end = self._t0 + self.ends_at if self.ends_at is not None else float("inf")
        event, subject, find = moment_finder(spec.after)
        moment = self.ctx.moments.wait(event, subject, find, end, self._stop)
        opens = None if moment is None else max(moment, self._t0) + spec.at
        if opens is None or opens >= end:
            self._unmet(index, spec, "its moment never came" if moment is None else "too late")
            return
        if self._stop.wait(max(0.0, opens - time.monotonic())):
            return
        if spec.kind in PROCESS_KINDS and not self._await_target_free(spec.target, end):
            self._unmet(index, spec, f"{spec.target} stayed down by another fault")
            return
        moment_s = None if moment is None else round(moment - self._t0, 3)
        self._open_window(index, spec, {"moment_s": moment_s})
        if spec.kind == "restart":
            return
        closes = min(time.monotonic() + spec.duration, end)
        if self._stop.wait(max(0.0, closes - time.monotonic())):
            return
        with self._lock:
            o = self._open.pop(index, None)
        if o is not None:
            self._close(o)

    def _await_target_free(self, target: str, end: float) -> bool:
        """Wait until no crash or pause window holds `target` (False if it still does at
        `end`, or the nemesis stopped): a second kill of a killed process would heal it
        twice."""
        with self._quiet:
            while any(
                o.spec.target == target and o.spec.kind in PROCESS_KINDS
                for o in self._open.values()
            ):
                left = end - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    return False
                self._quiet.wait(min(left, 0.1))
            return True

    def _unmet(self, index: int, spec: FaultSpec, why: str) -> None:
        """Record that window `index` never opened, and why."""
        assert spec.after is not None
        log.info("fault %s never opened: %s", spec.describe(), why)
        self.rec.mark(
            Mark.FAULT_UNMET,
            process="nemesis",
            extra={
                "fault": index,
                "kind": spec.kind,
                "target": spec.target,
                "after": spec.after.describe(),
                "why": why,
            },
        )

    def _open_window(
        self, index: int, spec: FaultSpec, moment: dict[str, Any] | None = None
    ) -> None:
        extra: dict[str, Any] = {"at": spec.at, "duration": spec.duration, **spec.params}
        if spec.after is not None:
            extra |= {"after": spec.after.describe(), **(moment or {})}
        if spec.params.get("when") == "busy":
            extra["busy"] = self._await_busy(spec)
        fault_id = self.rec.fault_start(spec.kind, spec.target, extra=extra)
        self.ctx.moments.emit("fault_start", str(index))
        self.windows += 1
        service = self._service_fault(spec)
        if service is not None:
            with self._lock:
                self._disturbed[service] += 1
        try:
            undo = self._apply(spec)
        except Exception as exc:
            # A fault that could not be injected is history too: close its window at once.
            log.exception("fault %s on %s could not be injected", spec.kind, spec.target)
            if extra.get("busy"):
                self._release(spec)
            self.errors.append(f"{spec.kind} {spec.target}: {exc}")
            self._failed(spec, f"could not take fault {spec.kind} {spec.target}: {_first(exc)}")
            self.rec.fault_stop(fault_id, error=f"not injected: {exc}"[:300])
            self._undisturb(service)
            return
        if spec.kind == "restart":
            self._undisturb(service)  # done at once: back and healthy already
        with self._lock:
            self._open[index] = _Open(spec, fault_id, undo, index)
            if spec.kind in PROCESS_KINDS and spec.kind != "restart":
                self._held[spec.target] += 1

    def _undisturb(self, service: str | None) -> None:
        if service is not None:
            with self._lock:
                self._disturbed[service] -= 1

    def _busy_target(self, spec: FaultSpec) -> Service:
        """The service a `when: busy` crash waits for: the setup's own process, else
        the stack's."""
        svc: Service = self.setup.process(spec.target) or self.ctx.stack[spec.target]
        return svc

    def _await_busy(self, spec: FaultSpec) -> bool:
        """Wait until the target is mid-batch (False if it never was within `wait` s);
        when it is, it is held frozen for the kill (`hold_if_busy`).

        A crash at a fixed time can land while a consumer is idle or still starting, and
        then cuts nothing short; the claims about crashes during processing need the kill
        inside the work, not a batch or a commit after the moment it was seen busy.
        """
        svc = self._busy_target(spec)
        # Not wait_until: the nemesis's stop cuts each pause short, as its other waits do.
        deadline = time.monotonic() + float(spec.params.get("wait", 5.0))
        while time.monotonic() < deadline:
            if svc.hold_if_busy():
                return True
            if self._stop.wait(0.005):
                break
        log.warning("crash of %s: not busy within its wait; striking anyway", spec.target)
        return False

    def _release(self, spec: FaultSpec) -> None:
        """Let a target held frozen for a crash that did not strike run on."""
        try:
            self._busy_target(spec).resume()
        except Exception:
            log.exception("%s, held for a crash that failed, could not be resumed", spec.target)

    def _close(self, o: _Open) -> None:
        error = None
        try:
            o.undo()
        except Exception as exc:
            if isinstance(exc, ConnectorFailed) and o.spec.target in self.setup.under_test:
                # The service came back; a connector of the system under test (a
                # pipeline file's own) did not: the pipeline's outcome, its verdict names.
                log.warning("after the heal of %s: %s", o.spec.target, _first(exc))
                error = f"under test: {_first(exc)}"[:300]
            else:
                log.exception("healing %s on %s failed", o.spec.kind, o.spec.target)
                self.errors.append(f"heal {o.spec.kind} {o.spec.target}: {exc}")
                self._failed(o.spec, f"could not be healed of {o.spec.kind}: {_first(exc)}")
                error = f"heal failed: {exc}"[:300]
        finally:
            if o.spec.kind != "restart":
                self._undisturb(self._service_fault(o.spec))
        self.rec.fault_stop(o.fault_id, error=error)
        self.ctx.moments.emit("fault_end", str(o.index))
        with self._quiet:
            if o.spec.kind in PROCESS_KINDS and o.spec.kind != "restart":
                self._held[o.spec.target] -= 1
            self._quiet.notify_all()

    def _apply(self, spec: FaultSpec) -> actions.Undo:
        stack = self.ctx.stack
        p = spec.params
        own = self.setup.process(spec.target)
        if own is not None and spec.kind in ("crash", "pause", "restart"):
            stack = {spec.target: own}  # a process of the setup's own (a consumer)
        if spec.kind == "crash":
            return actions.crash(stack, spec.target)
        if spec.kind == "pause":
            return actions.pause(stack, spec.target)
        if spec.kind == "restart":
            return actions.restart(stack, spec.target)
        if spec.kind in LINK_KINDS:
            return actions.link_fault(stack, spec.target, spec.kind, p)
        if spec.kind == "app-crash":
            return self._app_crash(spec)
        if spec.kind == "slow-consumer":
            return actions.slow_consumer(self.setup, spec.target, float(p.get("delay_ms", 100)))
        raise ValueError(f"fault kind {spec.kind!r} has no action")

    def _app_crash(self, spec: FaultSpec) -> actions.Undo:
        """Arm a crash at the step point `point` (default: between the two writes): a
        SIGKILL of the application process where the setup runs one (dual-write, outbox), an
        AppCrash raised in the client where its clients are threads."""
        point = spec.params.get("point", "after-source-write")
        p = float(spec.params.get("p", 1.0))
        rng = random.Random(f"{self.ctx.seed}/app-crash/{spec.at}")
        rng_lock = threading.Lock()

        def hook(reached: str, process: str, key: str) -> None:
            if reached != point:
                return
            with rng_lock:
                hit = rng.random() < p
            if hit:
                pid = self.setup.kill_app(process)
                extra: dict[str, Any] = {"point": point, "key": key}
                if pid is not None:
                    extra["pid"] = pid  # the process the SIGKILL ended
                self.rec.mark("app-crash", process=process, extra=extra)
                if pid is None:
                    raise AppCrash(f"{process} crashed at {point} writing {key}")

        self.ctx.steps.add(hook)
        return lambda: self.ctx.steps.remove(hook)


LINK_KINDS = ("cut", "down", "latency", "bandwidth", "reset")
"""The fault kinds Toxiproxy injects."""

PROCESS_KINDS = ("crash", "pause", "restart")
"""The fault kinds that act on a process or a service itself."""


def moment_finder(
    anchor: Anchor,
) -> tuple[str, str, Callable[[list[Moment]], float | None]]:
    """What `Moments.wait` watches for `anchor`: the reports' event and subject, and
    the function that finds the anchor's time among them."""
    if anchor.event in ("lag", "caught_up"):
        return "lag", anchor.subject, partial(_lag_moment, anchor)

    def nth(reports: list[Moment]) -> float | None:
        return reports[anchor.nth - 1].t if len(reports) >= anchor.nth else None

    return anchor.event, anchor.subject, nth


def _lag_moment(anchor: Anchor, samples: list[Moment]) -> float | None:
    """The time of the `nth` crossing of the lag threshold: upwards for `lag`; for
    `caught_up`, back to no lag at all after having been above it."""
    crossings, lagging = 0, False
    for s in samples:
        if not lagging and s.value > anchor.above:
            lagging = True
            crossings += anchor.event == "lag"
        elif lagging and s.value <= (0.0 if anchor.event == "caught_up" else anchor.above):
            lagging = False
            crossings += anchor.event == "caught_up"
        if crossings == anchor.nth:
            return s.t
    return None


def _first(exc: BaseException) -> str:
    """The first line of an error, short enough for one line of the terminal."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]
