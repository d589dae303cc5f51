"""Divergence: missing, extra, stale, phantom, in the reference and in Spark."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from keyed_support import agreed
from strategies_states import apply, kinds, state, write

FIGURE_11_4 = [
    # Two clients race on one key: the database orders v1 before v2, the cache
    # receives v2 first and v1 last.
    write(10, "x", "v1", 1, process="c1"),
    write(11, "x", "v2", 2, process="c2"),
    write(12, "x", "v2", store="cache", process="c2"),
    write(13, "x", "v1", store="cache", process="c1"),
    state(100, "source", "x", "v2"),
    state(101, "cache", "x", "v1"),
]

PLANTED = [
    write(1, "a", "a1", 1),
    write(2, "b", "b1", 1),
    write(3, "c", "c1", 1),
    write(4, "c", None, 2, f="delete"),
    write(5, "d", "d1", 1),
    write(6, "e", "e1", phase="info"),
    write(7, "f", "f1", phase="fail"),
    write(8, "f", "f2", 1),
    # counter C5: increments carry the new total, the consumer applied one twice
    write(9, "hits", "1", 1, f="increment"),
    write(10, "hits", "2", 2, f="increment"),
    apply(11, "counter", "hits", "1", 1),
    apply(12, "counter", "hits", "2", 2),
    apply(13, "counter", "hits", "3", 2),
    state(50, "source", "a", "a1"),  # cache lacks it: missing
    state(51, "source", "b", "b1"),  # clean
    state(52, "cache", "b", "b1"),
    state(53, "cache", "c", "c1"),  # deleted at source, still in the cache: extra
    state(54, "source", "d", "d1"),  # the cache read d first as gone, then as d1: clean
    state(55, "cache", "d", None),
    state(56, "cache", "d", "d1"),
    state(57, "source", "e", "e-other"),  # an info write reached the cache: stale
    state(58, "cache", "e", "e1"),
    state(59, "source", "f", "f2"),  # a failed write reached the cache: phantom
    state(60, "cache", "f", "f1"),
    state(61, "source", "hits", "2"),
    state(62, "counter", "hits", "3"),  # counter exceeds the source: phantom
    state(63, "cache", "g", None),  # deleted everywhere: clean
]


@pytest.mark.spark
def test_figure_11_4_race_leaves_the_cache_stale(spark) -> None:
    found = agreed(spark, FIGURE_11_4, "divergence")
    assert kinds(found) == Counter({("stale", "cache", "x"): 1})
    (a,) = found
    assert a.time == 101
    shown = [(e["store"], e.get("value")) for e in json.loads(a.evidence)]
    assert ("source", "v2") in shown and ("cache", "v1") in shown


@pytest.mark.spark
def test_planted_divergences_are_found_with_exact_counts(spark) -> None:
    found = agreed(spark, PLANTED, "divergence")
    assert kinds(found) == Counter(
        {
            ("missing", "cache", "a"): 1,
            ("extra", "cache", "c"): 1,
            ("stale", "cache", "e"): 1,
            ("phantom", "cache", "f"): 1,
            ("phantom", "counter", "hits"): 1,
            ("missing", "cache", "hits"): 1,
            # the counter store holds no other key the source holds
            **{("missing", "counter", key): 1 for key in "abdef"},
        }
    )
    missing = next(a for a in found if a.kind == "missing" and a.store == "cache")
    assert missing.time == 50  # no state in the store: the source's state shows it


@pytest.mark.spark
def test_a_store_read_empty_misses_every_source_key(spark) -> None:
    events = [
        state(1, "source", "a", "1"),
        state(2, "source", "b", "2"),
        state(3, "search", None, None),
    ]
    assert kinds(agreed(spark, events, "divergence")) == Counter(
        {("missing", "search", "a"): 1, ("missing", "search", "b"): 1}
    )


@pytest.mark.spark
def test_without_the_source_state_nothing_is_judged(spark) -> None:
    events = [write(1, "a", "a1", 1), state(2, "cache", "a", "zzz")]
    assert agreed(spark, events, "divergence") == []


@pytest.mark.spark
def test_clean_history_has_no_divergence(spark) -> None:
    events = [
        write(1, "a", "a1", 1),
        write(2, "a", None, 2, f="delete"),
        apply(3, "cache", "a", "a1", 1),
        apply(4, "cache", "a", None, 2),  # the delete reached the cache
        write(5, "b", "b1", 1),
        apply(6, "cache", "b", "b1", 1),
        state(10, "source", "b", "b1"),
        state(11, "cache", "b", "b1"),
    ]
    assert agreed(spark, events, "divergence") == []
