"""The cache-aside example as pytest tests, through driftlab's pytest plugin:

    .venv/bin/pytest examples/cache_aside -p no:cacheprovider

pytest puts this folder on sys.path, so the setup module and the scenario's workload
import as in scenario.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cache_aside import CacheAside
from scenario import SCENARIO

from driftlab import Outcome, Scenario


@pytest.fixture(scope="module")
def cache_aside_race(driftlab_scenario: Callable[..., Scenario]) -> Scenario:
    """The race of scenario.py, built from the setup class by the plugin's fixture."""
    return driftlab_scenario(
        CacheAside,
        name=SCENARIO.name,
        setup_params=SCENARIO.setup_params,
        workload=SCENARIO.workload,
        expectations=SCENARIO.expectations,
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
