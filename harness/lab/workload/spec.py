"""What a workload does: clients, keys, the operation mix, rate and duration."""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass, field
from typing import Any

OPS = ("write", "delete", "read")


@dataclass
class WorkloadSpec:
    """A workload of `clients` concurrent application clients.

    `keys` keys named `k0..k{keys-1}`, chosen `uniform`ly or by `zipf` with exponent
    `zipf_s` (k0 hottest). `mix` weighs writes, deletes and reads; with `read_own`
    a read targets the key the client wrote last (reading its own write) from one of
    `read_stores` (None: every store the setup offers). `rate` is the target of all
    clients together in ops/s (0: as fast as they go); `duration` in seconds.

    `rotate_s` > 0 moves the whole key space on every `rotate_s` seconds (k0..k4, then
    k5..k9, ...): hot keys that cool down for good, as trending items do. Each hot
    period is one more chance for a race to leave a key inconsistent, and a cooled key
    keeps what the race left in it, as a real one would.
    """

    clients: int = 4
    keys: int = 5
    distribution: str = "zipf"
    zipf_s: float = 1.1
    mix: dict[str, float] = field(default_factory=lambda: {"write": 1.0})
    read_own: bool = True
    read_stores: list[str] | None = None
    rate: float = 0.0
    duration: float = 10.0
    rotate_s: float = 0.0

    def validate(self) -> None:
        """Raise ValueError naming the bad field and what to use instead."""
        if self.clients < 1:
            raise ValueError(f"workload.clients is {self.clients}; use 1 or more")
        if self.keys < 1:
            raise ValueError(f"workload.keys is {self.keys}; use 1 or more")
        if self.distribution not in ("uniform", "zipf"):
            raise ValueError(f"workload.distribution {self.distribution!r}; use uniform or zipf")
        if self.rate < 0 or self.duration <= 0 or self.rotate_s < 0:
            raise ValueError(
                "workload.rate and rotate_s must be >= 0 and workload.duration > 0 seconds"
            )
        bad = set(self.mix) - set(OPS)
        if bad or not self.mix or sum(self.mix.values()) <= 0:
            raise ValueError(
                f"workload.mix {self.mix!r}: weights of {', '.join(OPS)} with a positive sum"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkloadSpec:
        """A spec from a scenario's `workload` mapping (unknown fields are an error)."""
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(
                f"workload has unknown fields {sorted(unknown)}; known: {sorted(known)}"
            )
        spec = cls(**data)
        spec.validate()
        return spec


class KeyChooser:
    """Draws keys uniformly or by a Zipf law over a finite key space.

    With `spec.rotate_s`, `__call__(elapsed)` draws from the key space of the period
    `elapsed` falls in.
    """

    def __init__(self, spec: WorkloadSpec, rng: random.Random) -> None:
        self.n = spec.keys
        self.rotate = spec.rotate_s
        self.rng = rng
        if spec.distribution == "zipf":
            weights = [1.0 / (i + 1) ** spec.zipf_s for i in range(spec.keys)]
            self.cum: list[float] | None = list(itertools.accumulate(weights))
        else:
            self.cum = None

    def __call__(self, elapsed: float = 0.0) -> str:
        if self.cum is None:
            i = self.rng.randrange(self.n)
        else:
            x = self.rng.random() * self.cum[-1]
            i = min(bisect.bisect_left(self.cum, x), self.n - 1)
        if self.rotate:
            i += self.n * int(elapsed // self.rotate)
        return f"k{i}"


class OpChooser:
    """Draws the next operation kind by the spec's mix."""

    def __init__(self, spec: WorkloadSpec, rng: random.Random) -> None:
        self.ops = [op for op in OPS if spec.mix.get(op, 0) > 0]
        self.cum = list(itertools.accumulate(spec.mix[op] for op in self.ops))
        self.rng = rng

    def __call__(self) -> str:
        x = self.rng.random() * self.cum[-1]
        return self.ops[min(bisect.bisect_left(self.cum, x), len(self.ops) - 1)]
