"""Fault schedules: which faults open and close when, overlapping or not.

A schedule is a list of `FaultSpec` windows in seconds from the start of the workload.
Windows may overlap (a partition during a crash); every window closes before the
recovery window at the end of the run, so the pipelines can drain before the final
reads. Schedules compose with `+` and are built by hand or by `periodic`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class FaultSpec:
    """One fault window: `kind` on `target` from `at` for `duration` seconds."""

    kind: str
    target: str
    at: float
    duration: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def until(self) -> float:
        return self.at + self.duration

    def validate(self) -> None:
        """Raise ValueError naming the bad field and the fix."""
        if self.kind not in FAULT_KINDS:
            raise ValueError(
                f"fault kind {self.kind!r} is unknown; use one of: {', '.join(sorted(FAULT_KINDS))}"
            )
        if self.at < 0 or self.duration < 0:
            raise ValueError(f"fault {self.kind} on {self.target}: at and duration must be >= 0")
        when = self.params.get("when")
        if when is not None and (self.kind != "crash" or when != "busy"):
            raise ValueError(
                f"fault {self.kind} on {self.target}: when={when!r}; only a crash takes "
                "`when: busy` (strike while the target is mid-batch); drop it or use crash"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaultSpec:
        """A window from a scenario's mapping: kind, target, at, duration, anything else
        goes to params."""
        d = dict(data)
        try:
            spec = cls(
                kind=d.pop("kind"),
                target=d.pop("target", ""),
                at=float(d.pop("at")),
                duration=float(d.pop("duration", 0.0)),
                params=d.pop("params", {}) | d,
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
                FaultSpec(f.kind, f.target, f.at * factor, f.duration * factor, f.params)
                for f in self.faults
            ),
            self.recovery,
        )

    def fitted(self, duration: float) -> Schedule:
        """Windows clipped so every fault closes before `duration - recovery`."""
        limit = max(0.0, duration - self.recovery)
        out = []
        for f in self.faults:
            if f.at >= limit:
                continue
            out.append(FaultSpec(f.kind, f.target, f.at, min(f.duration, limit - f.at), f.params))
        return Schedule(tuple(out), self.recovery)

    def validate(self) -> None:
        """Validate every window."""
        for f in self.faults:
            f.validate()


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
