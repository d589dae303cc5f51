"""Graph: contradictory orders of one key's writes (Figure 11-4), reference and Spark."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from keyed_support import agreed
from strategies_states import apply, kinds, write

FIGURE_11_4 = [
    write(10, "x", "v1", 1, process="c1"),
    write(11, "x", "v2", 2, process="c2"),
    write(12, "x", "v2", store="cache", process="c2"),
    write(13, "x", "v1", store="cache", process="c1"),
]

SOURCE_1_TO_4 = [write(i, "k", f"v{i}", i) for i in range(1, 5)]


@pytest.mark.spark
def test_figure_11_4_race_is_a_two_cycle(spark) -> None:
    (a,) = agreed(spark, FIGURE_11_4, "graph")
    assert (a.kind, a.store, a.key, a.time) == ("contradictory-order", "cache", "x", 13)
    assert a.detail.startswith("2-cycle 'v1' -> 'v2' -> 'v1'")
    shown = [(e["store"], e["value"]) for e in json.loads(a.evidence)]
    assert shown == [("source", "v1"), ("source", "v2"), ("cache", "v2"), ("cache", "v1")]


@pytest.mark.spark
def test_orders_that_agree_have_no_cycle(spark) -> None:
    events = [
        *SOURCE_1_TO_4,
        apply(10, "cache", "k", "v1", 1),
        apply(11, "cache", "k", "v1", 1),  # a duplicate is no step back
        apply(12, "cache", "k", "v3", 3),  # skipping v2 is no step back either
        apply(13, "cache", "k", "ghost", 2),  # carries no source write: left out
        apply(14, "cache", "k", "v4", 4),
    ]
    assert agreed(spark, events, "graph") == []


@pytest.mark.spark
def test_the_smallest_cycle_is_reported(spark) -> None:
    events = [
        *SOURCE_1_TO_4,
        apply(10, "cache", "k", "v1", 1),
        apply(11, "cache", "k", "v4", 4),
        apply(12, "cache", "k", "v2", 2),  # back from v4 to v2: the 3-cycle v2 v3 v4
        apply(13, "cache", "k", "v3", 3),
        apply(14, "cache", "k", "v4", 4),
        apply(15, "cache", "k", "v3", 3),  # back from v4 to v3: the 2-cycle v3 v4
        apply(20, "search", "k", "v4", 4),
        apply(21, "search", "k", "v1", 1),  # back to v1: only a 4-cycle
    ]
    found = agreed(spark, events, "graph")
    assert kinds(found) == Counter(
        {("contradictory-order", "cache", "k"): 1, ("contradictory-order", "search", "k"): 1}
    )
    cache, search = sorted(found, key=lambda a: a.store)
    assert cache.time == 12 and cache.detail.startswith("2-cycle 'v3' -> 'v4' -> 'v3'")
    assert search.time == 21 and search.detail.startswith("4-cycle 'v1' -> 'v2'")


@pytest.mark.spark
def test_a_delete_overtaken_by_an_older_write(spark) -> None:
    events = [
        write(1, "k", "v1", 1),
        write(2, "k", None, 2, f="delete"),
        apply(5, "cache", "k", None, 2),
        apply(6, "cache", "k", "v1", 1),
    ]
    (a,) = agreed(spark, events, "graph")
    assert a.time == 6 and "delete@2" in a.detail
