"""Search the schedules of a setup for one that breaks a property, and shrink it.

The loop judges each example with the simulator's tally (cheap, incremental); the
reference checkers then judge the minimal schedule's full history, so what the search
reports is what `driftlab analyze` would report on the same history.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from random import Random

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from driftlab.checkers.anomaly import Anomaly
from driftlab.harness.lab.explore.properties import Property, reference_anomalies
from driftlab.harness.lab.explore.schedule import Action, Schedule, Step
from driftlab.harness.lab.explore.sim.machine import SimResult
from driftlab.harness.lab.explore.spec import SetupSpec
from driftlab.harness.lab.explore.strategies import schedules


@dataclass(slots=True)
class SearchResult:
    """The outcome of one property's search."""

    spec: SetupSpec
    prop: Property
    seed: int
    examples: int  # schedules run: until the first break, or all of them
    shrink_runs: int  # further runs the shrinker made
    seconds: float
    steps: list[Step] | None = None  # the minimal schedule as drawn
    run: SimResult | None = None  # the minimal schedule run again
    anomalies: list[Anomaly] = field(default_factory=list)  # reference, all kinds
    missing_checkers: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        """Whether a schedule broke the property."""
        return self.steps is not None

    @property
    def as_predicted(self) -> bool:
        """Whether the outcome is the one the claims table predicts."""
        return self.found == (self.prop.predicted == "fails")

    @property
    def breaking(self) -> list[Anomaly]:
        """The reference anomalies that break the property."""
        return self.prop.breaking(self.anomalies)

    def schedule(self) -> Schedule:
        """The executed minimal schedule as a schedule file (requires `found`)."""
        assert self.run is not None, "no breaking schedule was found"
        spec = self.spec
        return Schedule(
            setup=spec.name,
            steps=self.run.executed,
            seed=self.seed,
            property=self.prop.name,
            examples=self.examples,
            anomalies=[
                {
                    "checker": a.checker,
                    "kind": a.kind,
                    "store": a.store,
                    "key": a.key,
                    "consumer": a.consumer,
                    "detail": a.detail,
                }
                for a in self.anomalies
            ],
            params=dict(spec.params),
        )


def search(spec: SetupSpec, prop: Property, examples: int = 500, seed: int = 0) -> SearchResult:
    """Run up to `examples` schedules of the simulated setup `spec` (the one
    `prop.setup` names); shrink the first that breaks `prop`.

    The same seed gives the same search, hence the same minimal schedule.
    """
    runs = 0
    first_break = 0

    def broken(steps: list[Step]) -> bool:
        nonlocal runs, first_break
        runs += 1
        hit = prop.broken_by(spec.run(steps).findings)
        if hit and not first_break:
            first_break = runs
        return hit

    config = settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )
    start = time.perf_counter()
    try:
        minimal = find(schedules(spec), broken, settings=config, random=Random(seed))
    except NoSuchExample:
        return SearchResult(spec, prop, seed, runs, 0, time.perf_counter() - start)
    elapsed = time.perf_counter() - start
    run = spec.run(minimal)
    # The executed steps make every client completion explicit, so renaming them keeps
    # the interleaving whatever order the quiesce would complete operations in.
    explicit = [s for s in run.executed if s.action != Action.QUIESCE]
    renamed = canonical(explicit, lambda steps: _same_shape_and_broken(spec, prop, steps))
    if renamed is not explicit:
        run = spec.run(renamed)
    anomalies, missing = reference_anomalies(run.events)
    return SearchResult(
        spec,
        prop,
        seed,
        first_break,
        runs - first_break,
        elapsed,
        steps=minimal,
        run=run,
        anomalies=anomalies,
        missing_checkers=missing,
    )


def canonical(steps: list[Step], still_breaks: Callable[[list[Step]], bool]) -> list[Step]:
    """Rename clients, workers and keys in order of first appearance (c1, then c2...).

    Clients and workers of one role are interchangeable in every setup, keys wherever
    they do not choose a partition; the renamed schedule is kept only if `still_breaks`
    it, so a renaming that changes what happens is never kept.
    """
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for step in steps:
        for name in (step.actor, step.key):
            if name and name[0] in "cwk" and name[1:].isdigit() and name not in names:
                counts[name[0]] = counts.get(name[0], 0) + 1
                names[name] = f"{name[0]}{counts[name[0]]}"
    renamed = [
        replace(
            s,
            actor=names.get(s.actor or "", s.actor),
            key=names.get(s.key or "", s.key),
            value=None,
            offset=None,
        )
        for s in steps
    ]
    return renamed if renamed != steps and still_breaks(renamed) else steps


def _same_shape_and_broken(spec: SetupSpec, prop: Property, steps: list[Step]) -> bool:
    """Every step still runs (none skipped, none added) and the property still breaks."""
    run = spec.run(steps)
    return len(run.executed) == len(steps) + 1 and prop.broken_by(run.findings)


def simulate(spec: SetupSpec, schedule: Schedule) -> SimResult:
    """Run a schedule file's steps on the simulated setup `spec` (its quiesce step is
    implied)."""
    return spec.run(s for s in schedule.steps if s.action != "quiesce")
