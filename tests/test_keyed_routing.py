"""The map side of the keyed pass (driftlab.checkers.keyed.routing): routing a history cut into
slices gives every event to exactly the groups driftlab.checkers.keyed.step.routes names, each
group to one bucket, and the slices' Facts shares merge into facts_of's Facts."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from keyed_support import any_history, history_table

from driftlab.checkers.keyed.facts import facts_of
from driftlab.checkers.keyed.routing import FactShare, route, with_positions
from driftlab.checkers.keyed.step import GROUP_COLUMN, POSITION_COLUMN, ROUTE_COLUMN, routes
from driftlab.harness.history.schema import COLUMNS, Event


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_history(), st.integers(1, 4), st.integers(1, 5))
def test_slices_route_like_the_reference(events: list[Event], slices: int, buckets: int) -> None:
    table = history_table(events)
    size = -(-len(events) // slices) or 1
    share = FactShare()
    found: Counter[tuple[int, int, str]] = Counter()
    bucket_of: dict[tuple[int, str], int] = {}
    for first in range(0, len(events), size):
        routed = route(with_positions(table.slice(first, size), first), buckets)
        share.merge(routed.share)
        for b, part in routed.buckets.items():
            assert 0 <= b < buckets
            for row in part.to_pylist():
                group = (row[ROUTE_COLUMN], row[GROUP_COLUMN])
                # A group is judged whole: all its rows in one bucket, whatever the slice.
                assert bucket_of.setdefault(group, b) == b
                pos = row[POSITION_COLUMN]
                assert Event(**{c: row[c] for c in COLUMNS}) == events[pos]
                found[(pos, *group)] += 1
    expected = Counter((pos, *r) for pos, e in enumerate(events) for r in routes(e))
    assert found == expected
    assert share.facts() == facts_of(events)
