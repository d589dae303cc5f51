"""The cache-aside example as pytest tests, through driftlab's pytest plugin:

    .venv/bin/pytest examples/cache_aside -p no:cacheprovider

pytest puts this folder on sys.path, so the setup module imports as in scenario.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cache_aside import CACHE, CacheAside

from harness.runner.outcome import Outcome
from harness.workload.spec import WorkloadSpec
from scenarios.model import ABSENT, PRESENT, Scenario


@pytest.fixture(scope="module")
def cache_aside_race(driftlab_scenario: Callable[..., Scenario]) -> Scenario:
    """The race of scenario.py, built from the setup class by the plugin's fixture."""
    return driftlab_scenario(
        CacheAside,
        name="cache-aside-race",
        setup_params={"fill_delay_ms": 5},
        workload=WorkloadSpec(
            clients=6,
            keys=3,
            distribution="uniform",
            mix={"write": 0.3, "read": 0.7},
            read_own=False,
            read_stores=[CACHE],
            rate=400,
            duration=8,
            rotate_s=0.5,
        ),
        expectations={"stale": PRESENT, "phantom": ABSENT},
    )


@pytest.mark.scenario
@pytest.mark.services
def test_the_cache_keeps_an_old_value(
    run_scenario: Callable[..., Outcome], cache_aside_race: Scenario
) -> None:
    outcome = run_scenario(cache_aside_race, seed=1, duration="4s")
    assert outcome.passed, outcome.summary()
    assert outcome.found.get("stale", 0) > 0
    assert outcome.report is not None
