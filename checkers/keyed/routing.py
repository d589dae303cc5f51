"""The map side of the keyed pass: a slice of the history's rows routed to their groups
and cut into buckets, and the slice's share of the Facts.

What driftlab.checkers.keyed.step.routes says of one event, said here of an Arrow table
at once (its tests on the columns' dictionaries in Arrow, the groups' hashes in DuckDB):
every row once per group that judges it, with its route, group and position in the
history; and the distinct fact rows (tag, a, b), driftlab.checkers.keyed.facts.tag_of
asked once of each distinct event shape, with the slice's clock span and header events.
tests/test_keyed_routing.py holds both to the plain-Python functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from driftlab.checkers.keyed.duck import cursor
from driftlab.checkers.keyed.facts import (
    Facts,
    facts_from_rows,
    tag_of,
)
from driftlab.checkers.keyed.masks import coded, is_set, one_of, starts_with
from driftlab.checkers.keyed.routes import ROUTES
from driftlab.checkers.keyed.step import (
    GROUP_COLUMN,
    KEY,
    MESSAGE,
    PARTITION,
    POSITION_COLUMN,
    ROUTE_COLUMN,
    table_events,
)
from driftlab.checkers.keyed.timeline import SERIES_COLUMNS, SERIES_MASK, SERIES_ROWS, series_mask
from driftlab.checkers.reference.common import WRITE_FS
from driftlab.harness.history.schema import Event, EventType, MsgAction, OpPhase

DICTIONARY_COLUMNS = (
    "type",
    "writer",
    "process",
    "phase",
    "f",
    "store",
    "action",
    "channel",
    "consumer",
    "kind",
    "target",
    "error",
)
"""The history's low-cardinality columns, read dictionary-coded from its Parquet (where
they are stored so): routing compares codes, and an exchanged file carries each distinct
name once instead of once a row, about a third fewer bytes."""

Key = tuple[int, str | None, int | None]
"""An event's (time, writer, seq): order_key without its flags."""

_HASHES = f"""
SELECT (hash({KEY}::INTEGER, key) % $buckets)::INTEGER AS k,
  (hash({MESSAGE}::INTEGER, msg_id) % $buckets)::INTEGER AS m
FROM t
"""
"""Every row's bucket by its key and by its message, as the KEY and MESSAGE routes' groups
(hash(route, group) % buckets): read from the slice's own columns, where hashing only
the routed rows first copied their strings out of the slice."""

_PARTITION_GROUPS = f"""
SELECT _g, (hash({PARTITION}::INTEGER, _g) % $buckets)::INTEGER AS _b FROM (
  SELECT channel || chr(0) || coalesce(CAST("partition" AS VARCHAR), '') AS _g FROM p)
"""
"""The PARTITION route's groups (driftlab.checkers.keyed.step.partition_group) and buckets
of the rows `p` (channel and partition)."""

_TAG_COLUMNS = ("type", "action", "consumer", "channel", "kind", "store", "phase", "f")
"""The columns driftlab.checkers.keyed.facts.tag_of reads, besides whether the key is set."""


def fact_rows(table: pa.Table) -> set[tuple[str, str | None, str | None]]:
    """The distinct fact rows (tag, a, b) of a slice's events: tag_of asked once of each
    distinct combination of the columns it reads, found in Arrow by their dictionary
    codes. DuckDB's tag of every row (a CASE over eight string columns) cost 42 ms a
    524k-event slice, this 19 ms."""
    rows: set[tuple[str, str | None, str | None]] = set()
    for batch in table.select([*_TAG_COLUMNS, "key"]).to_batches():
        columns = [coded(batch[c]) for c in _TAG_COLUMNS]
        codes = pa.table(
            {c: column.indices for c, column in zip(_TAG_COLUMNS, columns, strict=True)}
            | {"keyed": pc.is_valid(batch["key"])}
        )
        distinct = codes.group_by(codes.column_names).aggregate([])
        values = [
            column.dictionary.take(distinct[c]).to_pylist()
            for c, column in zip(_TAG_COLUMNS, columns, strict=True)
        ]
        for *named, keyed in zip(*values, distinct["keyed"].to_pylist(), strict=True):
            fields = dict(zip(_TAG_COLUMNS, named, strict=True))
            rows.add(tag_of(Event(**fields, key="" if keyed else None)))
    return rows


@dataclass
class FactShare:
    """One slice's share of the Facts: merged over every slice, the whole history's."""

    rows: set[tuple[str, str | None, str | None]] = field(default_factory=set)
    headers: list[tuple[int, Event]] = field(default_factory=list)
    """(position, header event): merged in the history's order."""
    t0: int | None = None
    t1: int | None = None
    spans: list[tuple[int, Key, Key, bool]] = field(default_factory=list)
    """(first position, first and last (time, writer, seq), whether in order within) of
    each slice with rows: merged, whether the history is in order (Facts.ordered)."""

    def merge(self, other: FactShare) -> None:
        """Add another slice's share to this one."""
        self.rows |= other.rows
        self.headers += other.headers
        self.spans += other.spans
        spans = [t for t in (self.t0, other.t0) if t is not None]
        self.t0 = min(spans, default=None)
        spans = [t for t in (self.t1, other.t1) if t is not None]
        self.t1 = max(spans, default=None)

    def facts(self) -> Facts:
        """The Facts of the slices merged so far."""
        headers = [e for _, e in sorted(self.headers, key=lambda h: h[0])]
        spans = sorted(self.spans, key=lambda s: s[0])
        # Each slice in order within, and each ending below the next one's start.
        ordered = all(s[3] for s in spans) and all(a[2] < b[1] for a, b in pairwise(spans))
        return facts_from_rows(self.rows, headers, self.t0 or 0, self.t1 or 0, ordered)


@dataclass
class Routed:
    """A slice routed: its rows per bucket (history columns, position, route, group),
    its rows for the series per bucket (driftlab.checkers.keyed.timeline.SERIES_ROWS) and its
    share of the Facts."""

    buckets: dict[int, pa.Table]
    series: dict[int, pa.Table]
    share: FactShare


def with_positions(table: pa.Table, first: int) -> pa.Table:
    """`table` with its rows' positions in the history, the first being `first`."""
    # From numpy's range, not Python's: pa.array(range) converts every int (60 ms a slice).
    positions = np.arange(first, first + table.num_rows, dtype=np.int64)
    return table.append_column(POSITION_COLUMN, pa.array(positions))


def route(table: pa.Table, buckets: int) -> Routed:
    """Route a slice (history columns plus position) to its groups and cut the routed
    rows into `buckets` by group: a group's rows land in one bucket, whatever slice
    they come from."""
    # A dictionary-coded column is read as a chunk per dictionary page, and a take of a
    # chunked column concatenates its chunks first, dictionaries unified: once here, not
    # at each of the takes below (some 35 ms a take of a 524k-event slice).
    table = table.combine_chunks()
    first = table.column(POSITION_COLUMN)[0].as_py() if table.num_rows else 0
    keyed, polled, messaged = _route_masks(table)
    with cursor() as con:
        con.register("t", table.append_column(SERIES_MASK, pa.array(series_mask(table))))
        hashes = con.sql(_HASHES.replace("$buckets", str(buckets))).to_arrow_table()
        at = pa.array(np.flatnonzero(polled))
        con.register("p", table.select(["channel", "partition"]).take(at))
        polls = con.sql(_PARTITION_GROUPS.replace("$buckets", str(buckets))).to_arrow_table()
        series = con.sql(
            SERIES_ROWS.replace("$buckets", str(buckets)).replace("$first", str(first))
        ).to_arrow_table()
        share = FactShare(rows=fact_rows(table))
        ((share.t0, share.t1),) = con.sql('SELECT min("time"), max("time") FROM t').fetchall()
    headers = table.take(pa.array(np.flatnonzero(one_of(table.column("type"), EventType.HEADER))))
    if table.num_rows:
        last = table.num_rows - 1
        share.spans = [(first, _key(table, 0), _key(table, last), _in_order(table))]
    positions = headers[POSITION_COLUMN].to_pylist()
    share.headers = list(zip(positions, table_events(headers), strict=True))
    series = _sorted(series, series.column("_b"))
    shared = table.select(list(SERIES_COLUMNS)).take(series.column("_i"))
    for name in series.column_names[1:-1]:  # between the row number and the bucket
        shared = shared.append_column(name, series.column(name))
    return Routed(
        _routed(table, (keyed, polled, messaged), hashes, polls),
        _cut(shared, series.column("_b")),
        share,
    )


def _route_masks(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which rows each route (ROUTES) takes: driftlab.checkers.keyed.step.routes said of
    the slice's columns, each test asked once of a column's dictionary
    (driftlab.checkers.keyed.masks)."""
    kind, action, channel = (table.column(c) for c in ("type", "action", "channel"))
    msg = one_of(kind, EventType.MSG)
    write_invoke = one_of(table.column("phase"), OpPhase.INVOKE) & one_of(
        table.column("f"), *WRITE_FS
    )
    log_event = one_of(action, MsgAction.PRODUCE) & (
        one_of(channel, "events") | starts_with(channel, "events:")
    )
    keyed = is_set(table.column("key")) & (
        one_of(kind, EventType.STATE)
        | (one_of(kind, EventType.OP) & ~write_invoke)
        | (msg & (one_of(action, MsgAction.DELIVER, MsgAction.APPLY, MsgAction.SKIP) | log_event))
    )
    polled = msg & one_of(action, MsgAction.PRODUCE, MsgAction.DELIVER) & is_set(channel)
    messaged = (
        msg
        & one_of(action, MsgAction.PRODUCE, MsgAction.DELIVER, MsgAction.APPLY)
        & is_set(table.column("msg_id"))
    )
    return keyed, polled, messaged


def _routed(
    table: pa.Table, masks: tuple[np.ndarray, ...], hashes: pa.Table, polls: pa.Table
) -> dict[int, pa.Table]:
    """The routed rows per bucket: within a bucket by route, each route's rows in a run
    of their own, so the reduce side takes them apart without copying them
    (driftlab.checkers.keyed.routes). A run's groups are the run's own key or msg_id
    column, sliced, not copied: only the PARTITION route's are made."""
    keyed, polled, messaged = (np.flatnonzero(m) for m in masks)
    bucket = np.concatenate(
        [
            hashes.column("k").to_numpy()[keyed],
            polls.column("_b").to_numpy(),
            hashes.column("m").to_numpy()[messaged],
        ]
    )
    routes = np.repeat(np.array(ROUTES, np.int32), [len(keyed), len(polled), len(messaged)])
    by = bucket * len(ROUTES) + routes
    order = pc.sort_indices(pa.array(by))
    rows = pa.array(np.concatenate([keyed, polled, messaged])).take(order)
    taken = table.take(rows).append_column(ROUTE_COLUMN, pa.array(routes).take(order))
    # The PARTITION route's groups in the same order: its rows sorted by bucket alone.
    made = polls.column("_g").take(pc.sort_indices(polls.column("_b")))
    out: dict[int, list[pa.Table]] = {}
    start = made_start = 0
    for run, n in enumerate(np.bincount(by).tolist()):
        if not n:
            continue
        b, r = divmod(run, len(ROUTES))
        if r == PARTITION:
            groups, made_start = made.slice(made_start, n), made_start + n
        else:
            groups = taken.column("key" if r == KEY else "msg_id").slice(start, n)
        part = taken.slice(start, n).append_column(GROUP_COLUMN, groups.cast(pa.string()))
        out.setdefault(b, []).append(part)
        start += n
    return {b: pa.concat_tables(parts) for b, parts in sorted(out.items())}


def _sorted(rows: pa.Table, by: pa.ChunkedArray) -> pa.Table:
    """`rows` sorted by `by`, a number per row."""
    return rows.take(pc.sort_indices(by))


def _key(table: pa.Table, row: int) -> Key:
    """The (time, writer, seq) of one row of a slice."""
    time, writer, seq = (table.column(c)[row].as_py() for c in ("time", "writer", "seq"))
    return time, writer, seq


def _in_order(table: pa.Table) -> bool:
    """facts.in_order of a slice's rows, in Arrow."""
    writer, seq, time = (table.column(c) for c in ("writer", "seq", "time"))
    if writer.null_count or seq.null_count:
        return False
    if pa.types.is_dictionary(writer.type):
        writer = _ranks(writer)
    n = table.num_rows - 1
    t0, t1, w0, w1, s0, s1 = (c.slice(i, n) for c in (time, writer, seq) for i in (0, 1))
    rises = pc.or_(
        pc.greater(t1, t0),
        pc.and_(
            pc.equal(t1, t0),
            pc.or_(pc.greater(w1, w0), pc.and_(pc.equal(w1, w0), pc.greater(s1, s0))),
        ),
    )
    return pc.all(rises).as_py() is not False


def _ranks(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary-coded column's values as their ranks among its values (equal values
    equal ranks): compared as the strings would be, without decoding every row's."""
    column = column.unify_dictionaries()
    if not column.num_chunks:
        return pa.chunked_array([], pa.uint64())
    rank = pc.rank(column.chunk(0).dictionary, tiebreaker="dense")
    return pa.chunked_array([rank.take(c.indices) for c in column.chunks], pa.uint64())


def _cut(rows: pa.Table, bucket: pa.ChunkedArray) -> dict[int, pa.Table]:
    """`rows` per bucket (buckets without rows left out), the rows sorted by bucket."""
    out: dict[int, pa.Table] = {}
    start = 0
    for entry in pc.value_counts(bucket).to_pylist():
        out[entry["values"]] = rows.slice(start, entry["counts"])
        start += entry["counts"]
    return out
