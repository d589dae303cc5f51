"""Fault schedules: which faults open and close when, overlapping or not.

A schedule is a list of `FaultSpec` windows. A window opens `at` seconds after the
start of the workload, or, when it has an `Anchor`, `at` seconds after a moment of
the run (a process's k-th ready line, the n-th acknowledged write, another fault's
start or end, a store's lag passing a threshold or catching up). Windows may overlap
(a partition during a crash); every window closes before the recovery window at the
end of the run, so the pipelines can drain before the final reads. Schedules compose
with `+` and are built by hand or by `periodic`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

FAULT_KINDS = {
    "crash": (
        "SIGKILL the target service, restart it when the window closes; with `when: busy`"
        " the kill waits (up to `wait` seconds, default 5) until the target is mid-batch"
    ),
    "pause": "SIGSTOP the target service, SIGCONT when the window closes",
    "restart": "graceful stop and start of the target service (a one-off, no window)",
    "cut": "Toxiproxy: a partition of the link to the target (bytes stop, clients time out)",
    "down": "Toxiproxy: the link to the target is down (connections closed and refused)",
    "latency": "Toxiproxy: `ms` (+/- `jitter_ms`) added to every packet on the link",
    "bandwidth": "Toxiproxy: the link limited to `kbps` kilobytes per second",
    "reset": "Toxiproxy: connections on the link are reset (TCP RST) after `timeout_ms`",
    "app-crash": "the application dies at step point `point` with probability `p`",
    "slow-consumer": "the setup's consumer `target` sleeps `delay_ms` per message",
}


ANCHOR_EVENTS = {
    "ready": "process P printed its ready line for the nth time (1: its first start, "
    "2: its first restart, ...)",
    "write": "the nth write of the workload was acknowledged by the source",
    "fault_start": "fault number N of this schedule (counted from 0) opened",
    "fault_end": "fault number N of this schedule closed (healed)",
    "lag": "store S's observed lag went above `above` seconds (nth: the nth time)",
    "caught_up": "store S showed every acknowledged write again after lagging more than "
    "`above` seconds (nth: the nth time)",
}
"""The moments a fault may wait for, each with what it means (docs/pipelines.md)."""


@dataclass(frozen=True)
class Anchor:
    """A moment of a run that a fault waits for: `event` (one of ANCHOR_EVENTS) of
    `subject` (a process, a store, a fault's number; "" for writes), its `nth`
    occurrence, and for lag moments the threshold `above` in seconds."""

    event: str
    subject: str = ""
    nth: int = 1
    above: float = 0.5

    def validate(self) -> None:
        """Raise ValueError naming the bad field and the fix."""
        if self.event not in ANCHOR_EVENTS:
            raise ValueError(
                f"after: {self.event!r} is not a moment; use one of: {', '.join(ANCHOR_EVENTS)}"
            )
        if self.nth < 1:
            raise ValueError(f"after.nth = {self.nth}: count from 1 (the first occurrence)")
        if self.above <= 0:
            raise ValueError(f"after.above = {self.above}: give a lag in seconds above 0")

    def describe(self) -> str:
        """The moment in words, for the terminal and the report."""
        nth = _ordinal(self.nth)
        if self.event == "ready":
            what = "start" if self.nth == 1 else f"{_ordinal(self.nth - 1)} restart"
            return f"{self.subject} ready after its {what}"
        if self.event == "write":
            return f"the {nth} acknowledged write"
        if self.event in ("fault_start", "fault_end"):
            edge = "opened" if self.event == "fault_start" else "healed"
            return f"fault {self.subject} {edge}"
        times = "" if self.nth == 1 else f" (the {nth} time)"
        if self.event == "lag":
            return f"{self.subject} lagging over {self.above:g} s{times}"
        return f"{self.subject} caught up after lagging over {self.above:g} s{times}"

    def to_mapping(self) -> dict[str, Any]:
        """The `after` table of a pipeline file's [[faults]] that names this moment."""
        if self.event == "write":
            return {"write": self.nth}
        subject: str | int = int(self.subject) if self.event.startswith("fault_") else self.subject
        out: dict[str, Any] = {self.event: subject}
        if self.nth != 1:
            out["nth"] = self.nth
        if self.event in ("lag", "caught_up") and self.above != 0.5:
            out["above"] = self.above
        return out

    @classmethod
    def from_mapping(cls, data: Any) -> Anchor:
        """The moment an `after` table names: exactly one of ready = "P", write = N,
        fault_start = N, fault_end = N, lag = "S", caught_up = "S", with `nth` and
        `above` where they apply (or the dataclass's own fields, as config.json holds
        them)."""
        if isinstance(data, dict) and "event" in data:
            anchor = cls(**data)
            anchor.validate()
            return anchor
        if not isinstance(data, dict):
            raise ValueError(
                'after is not a table; write after = { ready = "consumer", nth = 2 } '
                "(docs/pipelines.md, Faults at a moment)"
            )
        events = [k for k in data if k in ANCHOR_EVENTS]
        unknown = sorted(set(data) - set(ANCHOR_EVENTS) - {"nth", "above"})
        if unknown or len(events) != 1:
            raise ValueError(
                f"after = {data!r}: name exactly one moment of {', '.join(ANCHOR_EVENTS)}"
                ", with nth and above where they apply"
                + (f" ({', '.join(unknown)} is not a field)" if unknown else "")
            )
        event = events[0]
        value = data[event]
        nth, above = data.get("nth", 1), data.get("above", 0.5)
        if event == "write":
            if not isinstance(value, int) or isinstance(value, bool) or "nth" in data:
                raise ValueError("after.write: give the write's number, e.g. write = 200")
            nth, subject = value, ""
        elif event in ("fault_start", "fault_end"):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"after.{event}: give a fault's number, counted from 0")
            subject = str(value)
        else:
            if not isinstance(value, str) or not value:
                raise ValueError(f'after.{event}: give a name, e.g. {event} = "consumer"')
            subject = value
        if not isinstance(nth, int) or isinstance(nth, bool):
            raise ValueError("after.nth: give a whole number, e.g. nth = 2")
        if not isinstance(above, int | float) or isinstance(above, bool):
            raise ValueError("after.above: give seconds, e.g. above = 0.5")
        anchor = cls(event, subject, nth, float(above))
        anchor.validate()
        return anchor


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class FaultSpec:
    """One fault window: `kind` on `target` for `duration` seconds, opening `at` seconds
    after the start of the workload, or after the moment `after` when it has one."""

    kind: str
    target: str
    at: float
    duration: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)
    after: Anchor | None = None

    @property
    def until(self) -> float:
        return self.at + self.duration

    def describe(self) -> str:
        """The window in words: kind, target, when and how long."""
        when = (
            f"at {self.at:g} s"
            if self.after is None
            else (f"{self.at * 1000:g} ms after {self.after.describe()}")
        )
        length = f" for {self.duration:g} s" if self.duration else ""
        return f"{self.kind} {self.target} {when}{length}"

    def validate(self) -> None:
        """Raise ValueError naming the bad field and the fix."""
        if self.kind not in FAULT_KINDS:
            raise ValueError(
                f"fault kind {self.kind!r} is unknown; use one of: {', '.join(sorted(FAULT_KINDS))}"
            )
        if self.at < 0 or self.duration < 0:
            raise ValueError(f"fault {self.kind} on {self.target}: at and duration must be >= 0")
        if self.after is not None:
            self.after.validate()
        when = self.params.get("when")
        if when is not None and (self.kind != "crash" or when != "busy"):
            raise ValueError(
                f"fault {self.kind} on {self.target}: when={when!r}; only a crash takes "
                "`when: busy` (strike while the target is mid-batch); drop it or use crash"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaultSpec:
        """A window from a scenario's mapping: kind, target, at (seconds from the
        workload's start, or after the moment `after`), duration, anything else goes to
        params."""
        d = dict(data)
        after = d.pop("after", None)
        anchor = None if after is None else Anchor.from_mapping(after)
        try:
            spec = cls(
                kind=d.pop("kind"),
                target=d.pop("target", ""),
                at=float(d.pop("at") if anchor is None else d.pop("at", 0.0)),
                duration=float(d.pop("duration", 0.0)),
                params=d.pop("params", {}) | d,
                after=anchor,
            )
        except KeyError as exc:
            raise ValueError(f"fault {data!r} lacks {exc.args[0]!r}") from None
        spec.validate()
        return spec


@dataclass(frozen=True)
class Schedule:
    """Fault windows plus a recovery window (seconds) kept free of faults at the end."""

    faults: tuple[FaultSpec, ...] = ()
    recovery: float = 2.0

    def __add__(self, other: Schedule) -> Schedule:
        return Schedule(self.faults + other.faults, max(self.recovery, other.recovery))

    def scaled(self, factor: float) -> Schedule:
        """The same schedule stretched to a run `factor` times as long."""
        return Schedule(
            tuple(
                # A moment's delay is the program's time, not the workload's: kept.
                replace(f, at=f.at if f.after else f.at * factor, duration=f.duration * factor)
                for f in self.faults
            ),
            self.recovery,
        )

    def fitted(self, duration: float) -> Schedule:
        """Windows clipped so every fault closes before `duration - recovery` (a window
        at a moment is clipped when it opens: driftlab.harness.lab.nemesis.nemesis)."""
        limit = max(0.0, duration - self.recovery)
        out = []
        for f in self.faults:
            if f.after is not None:
                out.append(f)
                continue
            if f.at >= limit:
                continue
            out.append(replace(f, duration=min(f.duration, limit - f.at)))
        return Schedule(tuple(out), self.recovery)

    def validate(self) -> None:
        """Validate every window, and the moments that name other windows: an existing
        one, and no window waiting (through others) for itself."""
        for f in self.faults:
            f.validate()
        for i, f in enumerate(self.faults):
            chain = [i]
            while f.after is not None and f.after.event in ("fault_start", "fault_end"):
                j = int(f.after.subject)
                if j >= len(self.faults):
                    raise ValueError(
                        f"faults[{chain[-1]}] waits for fault {j}, and there are "
                        f"{len(self.faults)} (numbered 0 to {len(self.faults) - 1}); "
                        "name one of those"
                    )
                if j in chain:
                    circle = " -> ".join(str(k) for k in [*chain[chain.index(j) :], j])
                    raise ValueError(
                        f"faults wait for each other in a circle ({circle}); anchor one of "
                        "them to another moment or a time"
                    )
                chain.append(j)
                f = self.faults[j]


def periodic(
    kind: str,
    target: str,
    *,
    start: float,
    every: float,
    duration: float,
    until: float,
    jitter: float = 0.0,
    seed: int = 0,
    **params: Any,
) -> Schedule:
    """A window of `duration` every `every` seconds from `start` to `until`, each start
    moved by up to `jitter` seconds (seeded)."""
    rng = random.Random(f"{seed}/{kind}/{target}")
    faults = []
    t = start
    while t < until:
        at = max(0.0, t + rng.uniform(-jitter, jitter)) if jitter else t
        faults.append(FaultSpec(kind, target, at, duration, dict(params)))
        t += every
    return Schedule(tuple(faults))
