"""The scenario registry: claims by id, validation of every entry, overrides."""

from __future__ import annotations

import pytest

from driftlab.scenarios.catalogue.registry import all_scenarios, claims_scenarios, get_scenario


def test_every_registered_scenario_is_valid() -> None:
    registry = all_scenarios()
    assert registry
    for sc in registry.values():
        sc.validate()


def test_claims_c1_c2_c13_have_their_predictions() -> None:
    by_claim = {sc.claim: sc for sc in claims_scenarios(["C1", "C2", "C13"])}
    assert by_claim["C1"].expectations["stale"] == "present"
    assert by_claim["C2"].expectations["stale"] == "present"
    assert by_claim["C2"].faults.faults, "C2 needs a fault between the two writes"
    assert by_claim["C13"].expectations["ryw-violation"] == "present"
    assert get_scenario("c1") is by_claim["C1"]


def test_unknown_names_list_what_exists() -> None:
    with pytest.raises(KeyError, match="driftlab suite --list"):
        get_scenario("no-such-thing")
    with pytest.raises(KeyError, match="C99"):
        claims_scenarios(["C1", "C99"])


def test_overrides_stretch_faults_with_the_duration() -> None:
    sc = get_scenario("C2")
    short = sc.with_overrides(duration=5, clients=2, rate=50)
    assert (short.workload.duration, short.workload.clients, short.workload.rate) == (5, 2, 50)
    limit = 5 - short.faults.recovery
    assert short.faults.faults and all(f.until <= limit + 1e-9 for f in short.faults.faults)
    assert short.faults.faults[0].at == pytest.approx(sc.faults.faults[0].at / 2)
