"""The map side of the keyed pass: a slice of the history's rows routed to their groups
and cut into buckets, and the slice's share of the Facts.

What driftlab.checkers.keyed.step.routes says of one event, said here of an Arrow table
at once, in DuckDB: every row once per group that judges it, with its route, group and
position in the history; and the distinct fact rows (tag, a, b),
driftlab.checkers.keyed.facts.tag_of asked once of each distinct event shape, with the
slice's clock span and header events.
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
from driftlab.checkers.keyed.timeline import SERIES_COLUMNS, SERIES_ROWS
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

_WRITE_FS = ", ".join(f"'{f}'" for f in sorted(WRITE_FS))

_ROUTED = f"""
SELECT _i, _r, _g, (hash(_r, _g) % $buckets)::INTEGER AS _b FROM (
  SELECT {POSITION_COLUMN} - $first AS _i, {KEY}::INTEGER AS _r, key AS _g
  FROM t WHERE key IS NOT NULL AND (
    type = '{EventType.STATE}'
    OR (type = '{EventType.OP}'
        AND NOT coalesce(phase = '{OpPhase.INVOKE}' AND f IN ({_WRITE_FS}), false))
    OR (type = '{EventType.MSG}' AND (
      action IN ('{MsgAction.DELIVER}', '{MsgAction.APPLY}', '{MsgAction.SKIP}')
      OR (action = '{MsgAction.PRODUCE}'
          AND (channel = 'events' OR starts_with(channel, 'events:'))))))
  UNION ALL
  SELECT {POSITION_COLUMN} - $first, {PARTITION}::INTEGER,
    channel || chr(0) || coalesce(CAST("partition" AS VARCHAR), '')
  FROM t WHERE type = '{EventType.MSG}'
    AND action IN ('{MsgAction.PRODUCE}', '{MsgAction.DELIVER}') AND channel IS NOT NULL
  UNION ALL
  SELECT {POSITION_COLUMN} - $first, {MESSAGE}::INTEGER, msg_id
  FROM t WHERE type = '{EventType.MSG}'
    AND action IN ('{MsgAction.PRODUCE}', '{MsgAction.DELIVER}', '{MsgAction.APPLY}')
    AND msg_id IS NOT NULL)
"""
"""driftlab.checkers.keyed.step.routes for every row of `t` at once: which row (`_i`) goes to
which route and group, and the group's bucket. Unsorted: DuckDB's ORDER BY _b sorted
the whole rows, groups' strings and all (0.15 s a 420k-event slice); route() orders
them by bucket in Arrow, which sorts the bucket numbers alone."""

_HEADERS = f"SELECT {POSITION_COLUMN} - $first AS _i FROM t WHERE type = '{EventType.HEADER}'"

_TAG_COLUMNS = ("type", "action", "consumer", "channel", "kind", "store", "phase", "f")
"""The columns driftlab.checkers.keyed.facts.tag_of reads, besides whether the key is set."""


def fact_rows(table: pa.Table) -> set[tuple[str, str | None, str | None]]:
    """The distinct fact rows (tag, a, b) of a slice's events: tag_of asked once of each
    distinct combination of the columns it reads, found in Arrow by their dictionary
    codes. DuckDB's tag of every row (a CASE over eight string columns) cost 42 ms a
    524k-event slice, this 19 ms."""
    rows: set[tuple[str, str | None, str | None]] = set()
    for batch in table.select([*_TAG_COLUMNS, "key"]).to_batches():
        coded = [_coded(batch[c]) for c in _TAG_COLUMNS]
        codes = pa.table(
            {c: column.indices for c, column in zip(_TAG_COLUMNS, coded, strict=True)}
            | {"keyed": pc.is_valid(batch["key"])}
        )
        distinct = codes.group_by(codes.column_names).aggregate([])
        values = [
            column.dictionary.take(distinct[c]).to_pylist()
            for c, column in zip(_TAG_COLUMNS, coded, strict=True)
        ]
        for *named, keyed in zip(*values, distinct["keyed"].to_pylist(), strict=True):
            fields = dict(zip(_TAG_COLUMNS, named, strict=True))
            rows.add(tag_of(Event(**fields, key="" if keyed else None)))
    return rows


def _coded(array: pa.Array) -> pa.DictionaryArray:
    """`array` dictionary-coded (as the pass reads it; a test's plain strings coded here)."""
    return array if pa.types.is_dictionary(array.type) else pc.dictionary_encode(array)


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
    with cursor() as con:
        con.register("t", table)
        first = table.column(POSITION_COLUMN)[0].as_py() if table.num_rows else 0
        routes = con.sql(
            _ROUTED.replace("$buckets", str(buckets)).replace("$first", str(first))
        ).to_arrow_table()
        series = con.sql(
            SERIES_ROWS.replace("$buckets", str(buckets)).replace("$first", str(first))
        ).to_arrow_table()
        share = FactShare(rows=fact_rows(table))
        ((share.t0, share.t1),) = con.sql('SELECT min("time"), max("time") FROM t').fetchall()
        # Their rows by number, then taken whole: the query itself read every column of
        # every row (20 ms a slice).
        at = con.sql(_HEADERS.replace("$first", str(first))).to_arrow_table().column("_i")
        headers = table.take(at)
    if table.num_rows:
        last = table.num_rows - 1
        share.spans = [(first, _key(table, 0), _key(table, last), _in_order(table))]
    positions = headers[POSITION_COLUMN].to_pylist()
    share.headers = list(zip(positions, table_events(headers), strict=True))
    # Within a bucket by route, each route's rows in a run of their own: the reduce side
    # takes them apart without copying them (driftlab.checkers.keyed.routes).
    by = pc.add(pc.multiply(routes.column("_b"), len(ROUTES)), routes.column("_r"))
    routes = _sorted(routes, by)
    routed = (
        table.take(routes.column("_i"))
        .append_column(ROUTE_COLUMN, routes.column("_r"))
        .append_column(GROUP_COLUMN, routes.column("_g"))
    )
    series = _sorted(series, series.column("_b"))
    shared = table.select(list(SERIES_COLUMNS)).take(series.column("_i"))
    for name in series.column_names[1:-1]:  # between the row number and the bucket
        shared = shared.append_column(name, series.column(name))
    return Routed(
        _cut(routed, routes.column("_b")),
        _cut(shared, series.column("_b")),
        share,
    )


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
        writer = writer.cast(writer.type.value_type)
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


def _cut(rows: pa.Table, bucket: pa.ChunkedArray) -> dict[int, pa.Table]:
    """`rows` per bucket (buckets without rows left out), the rows sorted by bucket."""
    out: dict[int, pa.Table] = {}
    start = 0
    for entry in pc.value_counts(bucket).to_pylist():
        out[entry["values"]] = rows.slice(start, entry["counts"])
        start += entry["counts"]
    return out
