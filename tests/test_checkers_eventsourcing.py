"""Event sourcing: projection mismatches and invariant violations, reference and Spark."""

from __future__ import annotations

from collections import Counter

import pytest
from keyed_support import agreed
from strategies_states import header, kinds, produce, state

from driftlab.checkers.reference import eventsourcing as ref

PROJECTIONS = [
    produce(1, "a", "5", 1),
    produce(2, "a", "-2", 2, channel="events:acct"),
    produce(3, "b", "4", 1),
    produce(4, "b", "+1", 2),
    produce(5, "c", "7", 1),
    produce(6, "d", "3", 1, channel="orders"),  # not an event log
    produce(7, "e", "oops", 1),  # not an integer: adds nothing
    state(20, "projection:balance", "a", "3"),  # matches the fold
    state(21, "projection:balance", "b", "4"),  # one event missed: mismatch
    # c has events but no row: mismatch at its last event
    state(22, "projection:balance", "z", "0"),  # no events, fold 0: fine
    state(23, "projection:balance", "y", "2"),  # no events: mismatch
    state(24, "projection:balance", "e", "0"),
    state(25, "projection:count", "a", "three"),  # not an integer: mismatch
    state(26, "cache", "a", "99"),  # not a projection: not judged here
]

OVERDRAFT = [
    header({"invariant": {"min": 0}}),
    # appended out of time order: the version order is what counts
    produce(10, "acct", "5", 1),
    produce(14, "acct", "-3", 2),
    produce(12, "acct", "-4", 3),  # 5 - 3 - 4 = -2: violation
    produce(13, "acct", "-1", 4),  # -3: violation
    produce(11, "acct", "+2", 5),  # -1: still below, but moving back: fine
    produce(15, "other", "-1", 1),  # -1: violation
]

OVERBOOKING = [
    header({"scenario_note": "no invariant here"}),
    header({"invariant": {"max": 2}}),
    *[produce(20 + i, "flight", "1", i + 1) for i in range(4)],  # seats 3 and 4 overbook
    produce(30, "flight", "-1", 5),
]


@pytest.mark.spark
def test_projection_against_the_fold(spark) -> None:
    found = agreed(spark, PROJECTIONS, "eventsourcing")
    assert {a.kind for a in found} == {"projection-mismatch"}
    assert sorted((a.store, a.key) for a in found) == [
        *[("projection:balance", key) for key in "bcy"],
        # the count projection holds none of the other aggregates
        *[("projection:count", key) for key in "abce"],
    ]
    missing_c = next(a for a in found if a.store == "projection:balance" and a.key == "c")
    assert missing_c.time == 5


@pytest.mark.spark
def test_overdraft_in_version_order(spark) -> None:
    found = agreed(spark, OVERDRAFT, "eventsourcing")
    assert kinds(found) == Counter(
        {("invariant-violation", None, "acct"): 2, ("invariant-violation", None, "other"): 1}
    )
    assert sorted(a.time for a in found) == [12, 13, 15]


@pytest.mark.spark
def test_overbooking_beyond_the_maximum(spark) -> None:
    found = agreed(spark, OVERBOOKING, "eventsourcing")
    assert sorted(a.time for a in found if a.kind == "invariant-violation") == [22, 23]


@pytest.mark.spark
def test_without_an_invariant_nothing_is_violated(spark) -> None:
    assert agreed(spark, OVERDRAFT[1:], "eventsourcing") == []


def test_a_malformed_invariant_names_the_fix() -> None:
    with pytest.raises(ValueError, match=r"params.invariant must be like"):
        ref.check([header({"invariant": {"min": "zero"}}), produce(1, "a", "1", 1)])
