"""What one run of a candidate schedule showed, and what counts as new in it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from driftlab.harness.app.pipeline_search.space import Candidate


@dataclass(frozen=True)
class Trial:
    """One run of a candidate: whether it broke an expectation (`failed`), whether the
    lab failed in it (`lab_failed`: no verdict, or `lab failed`), and what it showed
    that a search may call new."""

    failed: bool
    lab_failed: bool = False
    verdict: str | None = None
    forbidden: dict[str, int] = field(default_factory=dict)  # kind -> count
    kinds: dict[str, int] = field(default_factory=dict)  # every anomaly kind found
    lag_s: dict[str, float] = field(default_factory=dict)  # store -> its largest lag
    overlaps: frozenset[str] = frozenset()  # "a+b": faults on a and b open together
    opened_at: tuple[float | None, ...] = ()  # per fault: when it opened (s), None: never
    run_dir: Path | None = None
    report: Path | None = None
    seed: int = 0
    wall_s: float = 0.0
    note: str = ""  # why the lab failed, or the verdict's reasons

    @property
    def unmet(self) -> int:
        """Faults that never opened (their moment never came)."""
        return sum(t is None for t in self.opened_at)


RunCandidate = Callable[[Candidate, int], Trial]
"""Runs a candidate once with a workload seed and tells what it showed."""


def features(trial: Trial) -> set[str]:
    """The behaviours a run showed, as names a search keeps a set of: each anomaly
    kind, a failure, each pair of targets hurt at once, and each store's largest lag by
    doublings (a store lagging twice as long as ever before is new)."""
    out = {f"anomaly:{k}" for k in trial.kinds}
    if trial.failed:
        out.add("fail")
    out |= {f"overlap:{pair}" for pair in trial.overlaps}
    for store, lag in trial.lag_s.items():
        # Every bucket up to its own: a lag is new only when longer than any before.
        out |= {f"lag:{store}:{b}" for b in range(lag_bucket(lag) + 1)}
    return out


def lag_bucket(lag_s: float) -> int:
    """0 below a quarter second, then one more per doubling."""
    return max(0, int(math.log2(max(lag_s, 0.125) / 0.125)))
