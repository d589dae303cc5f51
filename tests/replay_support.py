"""Schedules for the replay tests: found by the search, or fixed and run on the simulator."""

from __future__ import annotations

from pathlib import Path

from reference_counts import reference_anomalies as reference_anomalies_of

from driftlab.harness.lab.explore.properties import PROPERTIES, reference_anomalies
from driftlab.harness.lab.explore.schedule import Schedule, Step
from driftlab.harness.lab.explore.search import search
from driftlab.harness.lab.replay.replay import compare
from driftlab.scenarios.catalogue.architectures import simulated_setup


def explored(prop_name: str, seed: int, examples: int = 500) -> Schedule:
    """The minimal schedule the search finds breaking property `prop_name`."""
    (prop,) = [p for p in PROPERTIES if p.name == prop_name]
    result = search(simulated_setup(prop.setup), prop, examples=examples, seed=seed)
    assert result.found, f"the simulator found no break of {prop_name}"
    return result.schedule()


def simulated(setup: str, steps: list[Step]) -> Schedule:
    """`steps` run on the simulator of `setup`: the executed schedule, with the anomaly
    kinds the reference checkers find in its history (as `driftlab explore` saves)."""
    spec = simulated_setup(setup)
    run = spec.run(s for s in steps if s.action != "quiesce")
    anomalies, missing = reference_anomalies(run.events)
    assert not missing, f"reference checkers missing: {missing}"
    return Schedule(
        setup=setup,
        steps=run.executed,
        anomalies=[{"kind": a.kind, "key": a.key, "consumer": a.consumer} for a in anomalies],
        params=dict(spec.params),
    )


def judged(schedule: Schedule, run_dir: Path) -> set[str]:
    """The anomaly kinds the reference checkers find in the replay's run, asserted to be
    exactly the kinds the simulator found in `schedule`."""
    found = {a.kind for a in reference_anomalies_of(run_dir)}
    comparison = compare(schedule, found)
    assert comparison.same, comparison
    return found
