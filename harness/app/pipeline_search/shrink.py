"""Smaller schedules than a failing one, simplest first, for the shrinking to try.

Each is one step simpler than the schedule it comes from: a fault fewer, a shorter
workload, a shorter window, a shorter delay after its moment, or a fault at the clock
time its moment came at in the failing run. The shrinking (driftlab.harness.app.pipeline_search.
search) keeps the first that still fails k of n times and starts over from it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

from driftlab.harness.app.pipeline_search.space import DELAYS, START_S, Candidate, drop_fault
from driftlab.harness.app.pipeline_search.trial import Trial
from driftlab.harness.lab.nemesis.schedule import FaultSpec

MIN_WINDOW_S = 0.2
MIN_DURATION_S = 4.0  # a shorter workload leaves the pipeline no time to start and settle


def smaller(cand: Candidate, failing: Trial, recovery: float) -> Iterator[Candidate]:
    """The one-step simplifications of `cand`, whose run `failing` failed."""
    faults = cand.faults
    for i in reversed(range(len(faults))):
        if len(faults) > 1:
            yield replace(cand, faults=drop_fault(faults, i), origin=f"drop fault {i}")
    yield from _shorter_workloads(cand, recovery)
    for i, f in enumerate(faults):
        if f.duration > MIN_WINDOW_S:
            yield _with(cand, i, replace(f, duration=MIN_WINDOW_S), f"shortest window {i}")
            half = round(f.duration / 2, 1)
            if half > MIN_WINDOW_S:
                yield _with(cand, i, replace(f, duration=half), f"shorter window {i}")
    for i, f in enumerate(faults):
        if f.after is not None and f.at > 0:
            at = max((d for d in DELAYS if d < f.at), default=0.0)
            yield _with(cand, i, replace(f, at=at), f"shorter delay {i}")
    for i, f in enumerate(faults):
        opened = failing.opened_at[i] if i < len(failing.opened_at) else None
        if f.after is not None and opened is not None and not _named(faults, i):
            clock = max(START_S, round(opened, 1))
            yield _with(cand, i, replace(f, after=None, at=clock), f"clock time {i}")


def _with(cand: Candidate, i: int, fault: FaultSpec, origin: str) -> Candidate:
    faults = list(cand.faults)
    faults[i] = fault
    return replace(cand, faults=tuple(faults), origin=origin)


def _named(faults: tuple[FaultSpec, ...], i: int) -> bool:
    """Whether another fault waits for fault `i`'s start or end (its clock time would
    move theirs too)."""
    return any(
        f.after is not None
        and f.after.event in ("fault_start", "fault_end")
        and f.after.subject == str(i)
        for f in faults
    )


def _shorter_workloads(cand: Candidate, recovery: float) -> Iterator[Candidate]:
    """`cand` with the shortest workload its clock faults still fit in before the
    recovery, then one about a third shorter than its own."""
    fits = max((f.until for f in cand.faults if f.after is None), default=0.0)
    least = max(MIN_DURATION_S, float(math.ceil(fits + recovery + 0.3)))
    for duration in dict.fromkeys((least, max(least, float(round(cand.duration * 0.7))))):
        if duration < cand.duration:
            yield replace(cand, duration=duration, origin="shorter workload")
