"""The map side of the keyed pass (driftlab.checkers.keyed.routing): routing a history cut into
slices gives every event to exactly the groups driftlab.checkers.keyed.step.routes names, each
group to one bucket, and the slices' Facts shares merge into facts_of's Facts."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from keyed_support import any_history, history_table

from driftlab.checkers.keyed.facts import facts_of
from driftlab.checkers.keyed.routes import ROUTES, by_route, runs
from driftlab.checkers.keyed.routing import DICTIONARY_COLUMNS, FactShare, route, with_positions
from driftlab.checkers.keyed.step import GROUP_COLUMN, POSITION_COLUMN, ROUTE_COLUMN, routes
from driftlab.harness.history.schema import COLUMNS, Event


def as_read(table: pa.Table) -> pa.Table:
    """`table` as the pass reads a history: DICTIONARY_COLUMNS dictionary-coded, in two
    chunks with dictionaries of their own, as two row groups can have."""
    half = table.num_rows // 2

    def coded(part: pa.Table) -> pa.Table:
        for name in DICTIONARY_COLUMNS:
            at = part.schema.get_field_index(name)
            part = part.set_column(at, name, pc.dictionary_encode(part[name].combine_chunks()))
        return part

    return pa.concat_tables([coded(table.slice(0, half)), coded(table.slice(half))])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_history(), st.integers(1, 4), st.integers(1, 5), st.booleans())
def test_slices_route_like_the_reference(
    events: list[Event], slices: int, buckets: int, read: bool
) -> None:
    table = as_read(history_table(events)) if read else history_table(events)
    size = -(-len(events) // slices) or 1
    share = FactShare()
    found: Counter[tuple[int, int, str]] = Counter()
    bucket_of: dict[tuple[int, str], int] = {}
    for first in range(0, len(events), size):
        routed = route(with_positions(table.slice(first, size), first), buckets)
        share.merge(routed.share)
        for b, part in routed.buckets.items():
            assert 0 <= b < buckets
            # Each route's rows in one run, for the exchange to write apart.
            assert part[ROUTE_COLUMN].to_pylist() == sorted(part[ROUTE_COLUMN].to_pylist())
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


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_history(), st.integers(1, 3), st.integers(1, 7))
def test_a_bucket_split_by_route_holds_each_routes_rows(
    events: list[Event], buckets: int, cut: int
) -> None:
    """`by_route` gives a route's rows as a filter would, whether its batches are each
    one route's (as the exchange writes them) or mixed (the same rows cut anywhere)."""
    routed = route(with_positions(history_table(events), 0), buckets)
    for part in routed.buckets.values():
        written = [b for run in runs(part) for b in run.to_batches(max_chunksize=cut)]
        mixed = part.to_batches(max_chunksize=cut)
        for batches in (written, mixed):
            split = by_route(pa.Table.from_batches(batches, part.schema))
            assert sorted(split) == sorted(ROUTES)
            for r in ROUTES:
                expected = part.filter(pc.equal(part[ROUTE_COLUMN], r))
                assert split[r].to_pylist() == expected.to_pylist()


def test_writers_at_one_time_are_in_order_as_their_names_rise() -> None:
    """A slice's order (Facts.ordered) compares two writers' names at one time as
    strings, also when each name is coded in a dictionary of its own."""
    for names, ordered in ((["a", "b"], True), (["b", "a"], False)):
        events = [Event(type="mark", time=5, writer=w, seq=1, kind="x") for w in names]
        for table in (history_table(events), as_read(history_table(events))):
            (span,) = route(with_positions(table, 0), 1).share.spans
            assert span[3] is ordered
