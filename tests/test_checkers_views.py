"""View stores (issue 37): a key `S/...` of a view store S is judged against S only,
S only on such keys, and values that repeat across a view's versions are judged
exactly. The sieve, the groups and the Spark pass give the reference's rows."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from keyed_support import run_pass
from strategies_states import apply, kinds, read, state, write
from strategies_views import view_histories
from test_keyed_pass import reference_whole
from test_keyed_sieve import judged, stepped, stepped_chances

from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.checkers.coverage import chances
from driftlab.checkers.keyed.facts import facts_of
from driftlab.checkers.keyed.step import group_history, judge
from driftlab.checkers.reference import divergence, reorder, staleness
from driftlab.harness.history.schema import OBSERVER, Event

A, B = '{"lines":[]}', '{"lines":[1]}'


def views_header(*views: str) -> Event:
    """A run header naming the view stores."""
    extra = {"run_id": "r", "scenario": "s", "seed": 1, "params": {"views": list(views)}}
    return Event(type="header", time=0, writer="w", seq=0, extra=json.dumps(extra))


def states(key: str, *values: str | None, every: int = 10) -> list[Event]:
    """The view's committed states of `key`, versions 1.. at every `every` ns."""
    return [
        write(every * (i + 1), key, v, i + 1, f="write" if v is not None else "delete")
        for i, v in enumerate(values)
    ]


def sample(time: int, store: str, key: str, value: str, op: str) -> list[Event]:
    """The observer's sample of a value in a store (no version: a document has none)."""
    return read(time, time, OBSERVER, store, key, value, op)


def test_a_view_key_is_judged_against_its_store_only() -> None:
    events = [
        views_header("docs"),
        *states("docs/o1", A),
        state(100, "source", "docs/o1", A),
        state(100, "source", "o9", "v1"),
        state(101, "docs", "docs/o1", A),
        state(101, "docs", "o9", "v1"),
        state(102, "cache", "o9", "v1"),
    ]
    # Neither docs/o1 missing from cache nor o9 judged on docs.
    assert divergence.check(events) == []
    without = [e for e in events if e.type != "header"]
    assert kinds(divergence.check(without)) == Counter({("missing", "cache", "docs/o1"): 1})


def test_a_store_holding_the_current_state_is_never_stale() -> None:
    # A, B, then A again: the store holds A, the view's current state.
    history = [views_header("docs"), *states("docs/o1", A, B, A)]
    events = [*history, state(100, "source", "docs/o1", A), state(101, "docs", "docs/o1", A)]
    assert divergence.check(events) == []
    events = [*history, state(100, "source", "docs/o1", A), state(101, "docs", "docs/o1", B)]
    assert kinds(divergence.check(events)) == Counter({("stale", "docs", "docs/o1"): 1})
    half = '{"lines":[1,2]}'
    events = [*history, state(100, "source", "docs/o1", A), state(101, "docs", "docs/o1", half)]
    assert kinds(divergence.check(events)) == Counter({("phantom", "docs", "docs/o1"): 1})
    events = [*history[:1], *states("docs/o1", A, None), state(101, "docs", "docs/o1", A)]
    events.append(state(100, "source", None, None))
    assert kinds(divergence.check(events)) == Counter({("extra", "docs", "docs/o1"): 1})


def test_a_read_of_no_state_of_the_view_is_a_phantom_though_the_end_is_right() -> None:
    torn = '{"lines":[1,2]}'
    history = [views_header("docs"), *states("docs/o1", A, B, A, every=100)]
    finals = [state(1000, "source", "docs/o1", A), state(1001, "docs", "docs/o1", A)]
    seen = [*sample(150, "docs", "docs/o1", torn, "r1"), *sample(260, "docs", "docs/o1", torn, "r")]
    found = divergence.check([*history, *seen, *finals])
    assert kinds(found) == Counter({("phantom", "docs", "docs/o1"): 1})
    (a,) = found
    assert a.time == 150 and torn in a.detail and "(2 such reads)" in a.detail
    evidence = json.loads(a.evidence)
    assert evidence[0]["value"] == torn and evidence[0]["time"] == 150
    # The view's states around the read (version 1 before it, 2 and 3 after), then
    # the final states of the view and of the store.
    assert [e.get("version") for e in evidence[1:4]] == [1, 2, 3]
    assert [(e["type"], e["store"]) for e in evidence[4:]] == [
        ("state", "source"),
        ("state", "docs"),
    ]
    # A read of an `info` state may be one the view had; a torn final state is one phantom.
    info = write(120, "docs/o1", torn, None, phase="info", f="write")
    assert divergence.check([*history, info, *seen, *finals]) == []
    finals[1] = state(1001, "docs", "docs/o1", torn)
    assert kinds(divergence.check([*history, *seen, *finals])) == Counter(
        {("phantom", "docs", "docs/o1"): 1}
    )
    # Without views the same reads are judged as today: not at all.
    finals[1] = state(1001, "docs", "docs/o1", A)
    assert divergence.check([*history[1:], *seen, *finals]) == []


def test_a_repeated_value_is_a_stale_overwrite_only_when_it_can_only_be_older() -> None:
    history = [views_header("docs"), *states("docs/o1", A, B, A, B, A)]
    # A B A seen in order: versions 1, 2, 3 (or later): no step back.
    seen = [
        *sample(200, "docs", "docs/o1", A, "r1"),
        *sample(210, "docs", "docs/o1", B, "r2"),
        *sample(220, "docs", "docs/o1", A, "r3"),
    ]
    assert reorder.key_checks([*history, *seen]) == []
    # The last state shown, then A: every version of A is older.
    history = [views_header("docs"), *states("docs/o1", A, B, A, B, '{"x":1}')]
    seen = [
        *sample(200, "docs", "docs/o1", '{"x":1}', "r1"),
        *sample(210, "docs", "docs/o1", A, "r2"),
    ]
    found = reorder.key_checks([*history, *seen])
    assert kinds(found) == Counter({("stale-overwrite", "docs", "docs/o1"): 1})
    assert found[0].time == 210
    # Without views the same unversioned samples are not judged (today's rule).
    assert reorder.key_checks([*history[1:], *seen]) == []


def test_the_lag_of_a_repeated_value_is_timed_from_the_state_it_shows() -> None:
    events = [
        views_header("docs"),
        *states("docs/o1", A, B, A, every=100),
        *sample(150, "docs", "docs/o1", A, "r1"),
        *sample(250, "docs", "docs/o1", B, "r2"),
        *sample(340, "docs", "docs/o1", A, "r3"),
    ]
    # A at 150 is version 1's (ok at 100), B version 2's, A at 340 version 3's (ok at 300).
    assert sorted(staleness.lag_rows(events)) == [
        ("docs", 100, 50),
        ("docs", 200, 50),
        ("docs", 300, 40),
    ]


def test_an_effect_repeating_an_older_value_contradicts_no_order() -> None:
    events = [
        views_header("docs"),
        *states("docs/o1", A, B, A, every=100),
        apply(150, "docs", "docs/o1", A, None),
        apply(250, "docs", "docs/o1", B, None),
        apply(350, "docs", "docs/o1", A, None),
    ]
    found = reference_whole(events)
    assert not [a for a in found if a.kind in ("contradictory-order", "stale-overwrite")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(view_histories())
def test_the_groups_and_the_sieve_give_the_reference_on_view_histories(
    events: list[Event],
) -> None:
    out = judge(group_history(events), facts_of(events))
    assert not out.errors
    assert Counter(out.anomalies) == reference_whole(events)
    assert stepped(events) == judged(events)
    got, found = stepped_chances(events)
    assert got == chances(events)
    assert all(found[k] <= got[k] for k in ALL_KINDS)


@pytest.mark.spark
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(view_histories())
def test_spark_gives_the_reference_rows_on_view_histories(spark, events: list[Event]) -> None:
    out = run_pass(spark, events)
    assert Counter(out.anomalies) == reference_whole(events)
    assert out.figures.lag == staleness.lag(events)
    assert {k: out.figures.chances.get(k, 0) for k in ALL_KINDS} == chances(events)
