"""The declarative scenario: a setup, its parameters, a workload, faults and expectations.

A scenario is data. The runner reads it, and `config.json` of every run records it as
run (after command-line overrides), so a run can be explained and repeated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from driftlab.checkers import kinds
from driftlab.harness.lab.nemesis.schedule import FaultSpec, Schedule
from driftlab.harness.lab.workload.spec import WorkloadSpec

if TYPE_CHECKING:
    from driftlab.harness.lab.setups.base import Setup

PRESENT, ABSENT = "present", "absent"

CONVERGES = kinds.names(breaks_convergence=True)
"""What a derived store that converges to its source never shows: no key missing, stale
or invented, no write or message lost, no newer value overwritten by an older one."""


def expect(*, present: Iterable[str] = (), absent: Iterable[str] = ()) -> dict[str, str]:
    """A scenario's `expectations`: the anomaly kinds its claim predicts (`present`) and
    those it forbids (`absent`)."""
    return {**dict.fromkeys(present, PRESENT), **dict.fromkeys(absent, ABSENT)}


@dataclass(frozen=True)
class Scenario:
    """One experiment.

    `name` names the run folder; `claim` is the id in docs/claims.md (or None);
    `setup` a setup's name (driftlab.scenarios.catalogue.architectures.SETUPS) with `setup_params`;
    `setup_factory` builds the setup when the scenario carries it as a value (a
    pipeline file's), in place of the registry's class of that name;
    `faults` windows in seconds from the workload's start (scaled with `--duration` when
    `scale_faults`); `expectations` maps anomaly kinds (docs/checkers.md) to
    `present` (the claim's prediction: the lab must see it) or `absent` (forbidden);
    `min_chances` maps kinds to the chances (driftlab.checkers.coverage) a run must give them
    for its verdict to count, else it is inconclusive.
    """

    name: str
    setup: str
    summary: str
    claim: str | None = None
    setup_params: dict[str, Any] = field(default_factory=dict)
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    faults: Schedule = field(default_factory=Schedule)
    expectations: dict[str, str] = field(default_factory=dict)
    min_chances: dict[str, int] = field(default_factory=dict)
    scale_faults: bool = True
    quiesce_timeout: float = 30.0
    setup_factory: Callable[[], Setup] | None = field(default=None, compare=False, repr=False)

    def validate(self) -> None:
        """Raise ValueError naming what is wrong and how to fix it. Whether `setup`
        names a known setup is the registry's to say
        (driftlab.scenarios.catalogue.architectures.setup_factory)."""
        from driftlab.checkers.anomaly import ALL_KINDS

        self.workload.validate()
        self.faults.validate()
        for kind, want in self.expectations.items():
            if kind not in ALL_KINDS:
                raise ValueError(
                    f"scenario {self.name}: expectation on unknown anomaly kind {kind!r}; "
                    f"kinds: {', '.join(ALL_KINDS)}"
                )
            if want not in (PRESENT, ABSENT):
                raise ValueError(
                    f"scenario {self.name}: expectation {kind}={want!r}; use present or absent"
                )
        from driftlab.checkers.verdict import ExpectationError, check_min_chances

        try:
            check_min_chances(self.min_chances)
        except ExpectationError as e:
            raise ValueError(f"scenario {self.name}: {e}".replace("config.json: ", "")) from None

    def with_overrides(
        self,
        *,
        duration: float | None = None,
        clients: int | None = None,
        rate: float | None = None,
    ) -> Scenario:
        """The scenario with command-line overrides; faults stretch with the duration."""
        wl = self.workload
        faults = self.faults
        if duration is not None:
            if self.scale_faults:
                faults = faults.scaled(duration / wl.duration)
            wl = replace(wl, duration=duration)
        if clients is not None:
            wl = replace(wl, clients=clients)
        if rate is not None:
            wl = replace(wl, rate=rate)
        fitted = faults.fitted(wl.duration)
        if duration is not None and faults.faults and not fitted.faults:
            # Every fault dropped: a run that tests nothing of its claim.
            raise ValueError(
                f"--duration {duration:g}s leaves no room for any of scenario {self.name}'s "
                f"{len(faults.faults)} fault(s) before the last {faults.recovery:g} s, kept "
                f"for recovery; use --duration {self._shortest():g}s or more"
            )
        return replace(self, workload=wl, faults=fitted)

    def _shortest(self) -> float:
        """The shortest whole-second duration at which the first fault still fits."""
        first = min(f.at for f in self.faults.faults)
        recovery, full = self.faults.recovery, self.workload.duration
        if self.scale_faults and first < full:
            # Scaled by d / full, the fault opens at first * d / full < d - recovery.
            return float(math.floor(recovery / (1 - first / full)) + 1)
        return float(math.floor(first + recovery) + 1)

    def to_config(self) -> dict[str, Any]:
        """The `params` block of config.json (and of the history's header).

        A setup parameter `invariant` is repeated at the top level: the eventsourcing
        checker reads the bounds from the header's `params.invariant`; so is `views`, a
        pipeline's view stores, by which the checkers scope their keys.
        """
        invariant = self.setup_params.get("invariant")
        views = self.setup_params.get("views")
        return {
            **({"invariant": invariant} if invariant is not None else {}),
            **({"views": views} if views is not None else {}),
            "setup": self.setup,
            "claim": self.claim,
            "summary": self.summary,
            "setup_params": self.setup_params,
            "workload": asdict(self.workload),
            "faults": [asdict(f) for f in self.faults.faults],
            "recovery": self.faults.recovery,
            "quiesce_timeout": self.quiesce_timeout,
        }


def faults(*windows: dict[str, Any], recovery: float = 2.0) -> Schedule:
    """A schedule from plain mappings (kind, target, at, duration, params...)."""
    return Schedule(tuple(FaultSpec.from_dict(w) for w in windows), recovery)
