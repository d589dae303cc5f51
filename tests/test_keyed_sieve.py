"""The sieve of the keyed pass (driftlab.checkers.keyed.sieve) clears only groups in which the
reference finds nothing, and gives the cleared groups' lag and notes as the reference
does: the partition step with the sieve equals the reference over every group."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from keyed_support import any_history

from driftlab.checkers.anomaly import ALL_KINDS, ANOMALY_COLUMNS
from driftlab.checkers.coverage import chances
from driftlab.checkers.keyed.facts import facts_of
from driftlab.checkers.keyed.routes import by_route
from driftlab.checkers.keyed.sieve import Sieved, sieve
from driftlab.checkers.keyed.step import (
    ANOMALY,
    CHANCE,
    GROUP_COLUMN,
    LAG,
    NOTE,
    POSITION_COLUMN,
    REALTIME_SERIES,
    ROUTE_COLUMN,
    group_history,
    judge,
    partition_step,
    routes,
)
from driftlab.checkers.keyed.timeline import SERIES_ROW
from driftlab.checkers.reference.common import order_key
from driftlab.harness.history.schema import COLUMNS, INT_COLUMNS, Event
from driftlab.harness.lab.testing.synthetic import generate


def routed_table(events: list[Event]) -> pa.Table:
    """The rows the Spark pass routes (driftlab.checkers.keyed.spark.routed), in plain Python."""
    rows: dict[str, list] = {c: [] for c in (*COLUMNS, POSITION_COLUMN, ROUTE_COLUMN, GROUP_COLUMN)}
    for pos, e in enumerate(events):
        for route, group in routes(e):
            for c in COLUMNS:
                rows[c].append(getattr(e, c))
            rows[POSITION_COLUMN].append(pos)
            rows[ROUTE_COLUMN].append(route)
            rows[GROUP_COLUMN].append(group)
    schema = pa.schema(
        [pa.field(c, pa.int64() if c in INT_COLUMNS else pa.string()) for c in COLUMNS]
        + [
            pa.field(POSITION_COLUMN, pa.int64()),
            pa.field(ROUTE_COLUMN, pa.int32()),
            pa.field(GROUP_COLUMN, pa.string()),
        ]
    )
    return pa.table(rows, schema=schema)


def stepped(events: list[Event]) -> tuple[Counter, dict[str, int], Counter, Counter]:
    """Anomalies, non-zero notes, lag samples and each channel partition's worst
    realtime lag of the partition step with the sieve."""
    facts = facts_of(events)
    table = routed_table(events)
    anomalies: Counter = Counter()
    notes: Counter[str] = Counter()
    lags: Counter = Counter()
    realtime: Counter = Counter()
    if table.num_rows == 0:
        return anomalies, {}, lags, realtime
    for batch in partition_step(facts, 5)(iter(table.to_batches())):
        for row in batch.to_pylist():
            if row["out"] == ANOMALY:
                anomalies[tuple(row[c] for c in ANOMALY_COLUMNS)] += 1
            elif row["out"] == NOTE:
                notes[row["kind"]] += row["n"]
            elif row["out"] == LAG:
                lags[(row["store"], row["time"], row["n"])] += 1
            elif row["out"] == SERIES_ROW and row["kind"] == REALTIME_SERIES:
                realtime[row["detail"]] += 1
    return anomalies, {k: v for k, v in notes.items() if v}, lags, realtime


def judged(events: list[Event]) -> tuple[Counter, dict[str, int], Counter, Counter]:
    """The same of the reference over every group."""
    out = judge(group_history(events), facts_of(events))
    anomalies = Counter(tuple(getattr(a, c) for c in ANOMALY_COLUMNS) for a in out.anomalies)
    realtime = Counter(json.dumps(lag.to_dict()) for lag in out.realtime)
    return anomalies, {k: v for k, v in out.notes.items() if v}, Counter(out.lags), realtime


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_history())
def test_the_sieve_keeps_what_the_reference_finds(events: list[Event]) -> None:
    assert stepped(events) == judged(events)


def sieved(found: Sieved) -> tuple:
    """What the sieve found, in an order of its own (its queries' rows come in any)."""
    return (
        sorted(tuple(r.values()) for r in found.suspects.to_pylist()),
        sorted(tuple(r.values()) for r in found.lags.to_pylist()),
        sorted(found.narrowed.polls, key=str),
        sorted(found.narrowed.sends),
        sorted(found.narrowed.offsets),
        found.unseen,
        found.recovered,
        sorted(map(str, found.realtime)),
        found.chances,
    )


def in_history_order(events: list[Event]) -> list[Event]:
    """`events` as driftlab writes a history: in order_key's order, each with a writer
    and a seq (Facts.ordered), the seq numbering them."""
    ordered = sorted(events, key=order_key)
    return [replace(e, writer=e.writer or "", seq=i) for i, e in enumerate(ordered)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_history().map(in_history_order))
def test_a_history_in_order_is_sieved_by_position_as_by_the_order(events: list[Event]) -> None:
    """In a history in order the sieve's windows order by position alone: what it keeps
    is what the five keys of order_key keep, and the reference's findings."""
    facts = facts_of(events)
    assert facts.ordered
    table = routed_table(events)
    if table.num_rows:
        by_position = sieve(by_route(table), facts)
        by_order = sieve(by_route(table), replace(facts, ordered=False))
        assert sieved(by_position) == sieved(by_order)
    assert stepped(events) == judged(events)


def stepped_chances(events: list[Event]) -> tuple[dict[str, int], Counter[str]]:
    """Each kind's chances as the partition step counts them (driftlab.checkers.keyed.coverage),
    and the kinds it found."""
    table = routed_table(events)
    got: Counter[str] = Counter({k: 0 for k in ALL_KINDS})
    found: Counter[str] = Counter()
    if table.num_rows == 0:
        return dict(got), found
    for batch in partition_step(facts_of(events), 5)(iter(table.to_batches())):
        for row in batch.to_pylist():
            if row["out"] == CHANCE:
                got[row["kind"]] += row["n"]
            elif row["out"] == ANOMALY:
                found[row["kind"]] += 1
    return dict(got), found


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_history())
def test_the_step_counts_every_kinds_chances_as_the_reference(events: list[Event]) -> None:
    """Coverage is tested as the counts are: every kind's chances in the keyed pass's
    step equal driftlab.checkers.coverage's over the whole history, and no kind is found more
    often than it had a chance."""
    expected = chances(events)
    got, found = stepped_chances(events)
    assert got == expected
    assert all(found[k] <= expected[k] for k in ALL_KINDS), (found, expected)


def test_a_synthetic_history_with_every_kind_planted(tmp_path) -> None:
    """Mostly clean groups with every kind planted: the sieve clears most of them and
    the step still gives the reference's rows."""
    generate(tmp_path, 20_000, seed=7, plant={k: 3 for k in ALL_KINDS})
    t = pq.read_table(tmp_path / "history.parquet")
    events = [Event(*v) for v in zip(*(t.column(c).to_pylist() for c in COLUMNS), strict=True)]
    assert stepped(events) == judged(events)
    assert stepped_chances(events)[0] == chances(events)
    sieved = sieve(by_route(routed_table(events)), facts_of(events))
    groups = len(group_history(events))
    assert sieved.suspects.num_rows < groups / 4
