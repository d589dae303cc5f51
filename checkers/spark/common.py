"""Vocabulary of docs/checkers.md shared by the Spark checkers, as Column expressions.

Mirrors checkers/reference/common.py. Shared between checkers: add helpers with small
edits, keep the existing ones stable.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from checkers.anomaly import ANOMALY_COLUMNS, MAX_EVIDENCE, SPARK_DDL
from harness.history.schema import COLUMNS, SOURCE_STORE, EventType, MsgAction, OpPhase

WRITE_FS = ["write", "delete", "increment"]
"""The `f` of an operation that writes a store."""

ORDER = ["time", "writer", "seq"]
"""Time order of events; equal times keep recorded order. Ascending puts nulls first,
as checkers.reference.common.order_key does."""


def _true(c: Column) -> Column:
    """A predicate with null read as false, safe in select as well as filter."""
    return F.coalesce(c, F.lit(False))


def is_source_write() -> Column:
    """An operation writing the source, in any phase."""
    return _true(
        (F.col("type") == EventType.OP)
        & (F.col("store") == SOURCE_STORE)
        & F.col("f").isin(WRITE_FS)
    )


def is_effect() -> Column:
    """A write reaching a derived store: an `apply` message or a direct `ok` write."""
    applied = (F.col("type") == EventType.MSG) & (F.col("action") == MsgAction.APPLY)
    written = (
        (F.col("type") == EventType.OP) & (F.col("phase") == OpPhase.OK) & F.col("f").isin(WRITE_FS)
    )
    return _true((F.col("store") != SOURCE_STORE) & (applied | written))


def event_struct(prefix: str = "") -> Column:
    """The whole event as one struct (serialized by to_json like Event.to_dict), from
    the columns named `prefix` + its field."""
    return F.struct(*[F.col(prefix + c).alias(c) for c in COLUMNS])


def timed_event(prefix: str = "") -> Column:
    """The event as a struct that sorts in time order: (t, w, s, e)."""
    return F.struct(
        F.col(prefix + "time").alias("t"),
        F.col(prefix + "writer").alias("w"),
        F.col(prefix + "seq").alias("s"),
        event_struct(prefix).alias("e"),
    )


ROW_ID = "_row"
"""The column with_row_id adds: a number per event, distinct from every other's."""

_SCANNED = "_e_"


def with_row_id(events: DataFrame) -> DataFrame:
    """`events` with ROW_ID, so that windows and shuffles carry a few narrow columns and
    the flagged rows find their whole event again (attach_events).

    `writer` and `seq` may be null (hand-made histories): they do not identify an event.
    monotonically_increasing_id numbers rows by partition and position, which every scan
    of one input (an in-memory or a Parquet history) repeats, and no filter is pushed
    below it, so every use of the result numbers the events alike.
    """
    return events.withColumn(ROW_ID, F.monotonically_increasing_id())


BROADCAST_ROWS = 100_000
"""The most rows join_side broadcasts: flagged rows are narrow, so this many stay far
below the driver's memory."""


def join_side(frame: DataFrame) -> tuple[DataFrame, Callable[[DataFrame], DataFrame]]:
    """`frame` computed once (a local checkpoint, freed with the frame), and how to hint
    a join with it or a frame derived from it: broadcast while it has at most
    BROADCAST_ROWS rows, no hint otherwise.

    Adaptive execution would broadcast a small side too, but only after it has shuffled
    the other: the whole history, for a handful of flagged rows. A hint on a side of
    millions of rows would pull them all through the driver.
    """
    # Lazy: the count computes and keeps it; an eager checkpoint runs jobs of its own
    # first, which made small histories' analyses seconds slower.
    frame = frame.localCheckpoint(eager=False)
    if frame.count() <= BROADCAST_ROWS:
        return frame, F.broadcast
    return frame, lambda f: f


def attach_events(frame: DataFrame, events: DataFrame, **ids: str) -> DataFrame:
    """`frame` with a timed_event column per `name=id_column`: the event of `events` (a
    with_row_id frame) whose ROW_ID that column holds. Rows whose ids match no event
    drop out; with several ids, the rows of `frame` must be distinct.

    Meant for flagged rows: whole events are built for those rows alone, and `frame` is
    broadcast while it is small (join_side).
    """
    frame, hint = join_side(frame)
    scanned = events.select(*[F.col(c).alias(_SCANNED + c) for c in (ROW_ID, *COLUMNS)])
    found = F.col(_SCANNED + ROW_ID)
    event = timed_event(_SCANNED)
    if len(ids) == 1:
        ((name, id_column),) = ids.items()
        joined = scanned.join(hint(frame), found == F.col(id_column))
        return joined.select(*frame.columns, event.alias(name))
    # Every scan decodes whole events: one scan finds all of a row's, then one small
    # aggregation puts them side by side again.
    wanted = F.array(*[F.struct(F.lit(n).alias("n"), F.col(c).alias("id")) for n, c in ids.items()])
    pairs = frame.select(*frame.columns, F.explode(wanted).alias("_want"))
    joined = scanned.join(hint(pairs), found == F.col("_want.id"))
    by_name = [F.max(F.when(F.col("_want.n") == n, event)).alias(n) for n in ids]
    return (
        joined.groupBy(*frame.columns)
        .agg(*by_name)
        .filter(F.forall(F.array(*ids), lambda e: e.isNotNull()))
    )


def evidence_column(timed: Column, first: Column | None = None) -> Column:
    """The evidence JSON: the events of `first` (an array of event structs), then the
    latest of `timed` (an array of timed_event structs) in time order, at most
    MAX_EVIDENCE in all."""
    head = first if first is not None else F.array()
    room = F.lit(MAX_EVIDENCE) - F.size(head)
    ordered = F.array_sort(timed)
    start = F.greatest(F.size(ordered) - room, F.lit(0)) + 1
    tail = F.transform(F.slice(ordered, start, room), lambda x: x["e"])
    return F.to_json(F.slice(F.concat(head, tail), 1, MAX_EVIDENCE))


def final_states(events: DataFrame) -> DataFrame:
    """(store, key, value, time, ev): each key's last `state` event, when it holds a value.

    A null value there means the store does not hold the key; `state` events with a
    null key only mark a store as read (see state_stores).
    """
    states = events.filter(
        (F.col("type") == EventType.STATE) & F.col("store").isNotNull() & F.col("key").isNotNull()
    )
    latest = Window.partitionBy("store", "key").orderBy(*[F.col(c).desc() for c in ORDER])
    return (
        states.withColumn("_rn", F.row_number().over(latest))
        .filter((F.col("_rn") == 1) & F.col("value").isNotNull())
        .select("store", "key", "value", "time", event_struct().alias("ev"))
    )


def state_stores(events: DataFrame) -> DataFrame:
    """(store): every store with a `state` event, the stores whose final state is known."""
    return (
        events.filter((F.col("type") == EventType.STATE) & F.col("store").isNotNull())
        .select("store")
        .distinct()
    )


def in_order(*partition: str) -> WindowSpec:
    """A window over `partition` in time order."""
    return Window.partitionBy(*partition).orderBy(*ORDER)


def is_msg(action: str) -> Column:
    """A `msg` event with that `action` (null read as false)."""
    return _true((F.col("type") == EventType.MSG) & (F.col("action") == action))


def anomaly_rows(frame: DataFrame, checker: str, **cols: Column) -> DataFrame:
    """`frame` projected to the anomaly columns (each given by name, but `checker`) with
    the types of SPARK_DDL."""
    cols["checker"] = F.lit(checker)
    types = dict(part.strip().split(" ") for part in SPARK_DDL.split(","))
    return frame.select(*[cols[c].cast(types[c]).alias(c) for c in ANOMALY_COLUMNS])


def ok_source_writes(events: DataFrame) -> DataFrame:
    """`ok` source writes with a key and a version: the writes with a known order."""
    return events.filter(
        is_source_write()
        & (F.col("phase") == OpPhase.OK)
        & F.col("key").isNotNull()
        & F.col("version").isNotNull()
    )


def carried_writes(events: DataFrame, *, with_effect: bool = False) -> DataFrame:
    """Effects with the `ok` source write each carries, as reference SourceWrites.of:
    (store, key, time, writer, seq, wv, ok_time), the effect's identity and time with the
    write's version and `ok` time, and with `with_effect` also `e`, the effect's event.

    Two equi-joins, by (key, value) and for deletes by (key, version), so a hot key's
    effects never meet all of its writes. Both join by key, so carried_writes of the
    events of some keys is exactly the rows of those keys.
    """
    writes = ok_source_writes(events).select(
        "key", "value", "f", "version", F.col("time").alias("ok_time")
    )
    # The event struct is the widest column by far: only callers that show it get it.
    effect = [event_struct().alias("e")] if with_effect else []
    effects = events.filter(
        F.col("type").isin(EventType.OP, EventType.MSG) & is_effect() & F.col("key").isNotNull()
    ).select("store", "key", "value", "version", *ORDER, *effect)
    by_value = effects.filter(F.col("value").isNotNull()).join(
        writes.filter(F.col("value").isNotNull()).select(
            "key", "value", F.col("version").alias("wv"), "ok_time"
        ),
        ["key", "value"],
    )
    by_delete = effects.filter(F.col("value").isNull() & F.col("version").isNotNull()).join(
        writes.filter(F.col("value").isNull() & (F.col("f") == "delete")).select(
            "key", "version", F.col("version").alias("wv"), "ok_time"
        ),
        ["key", "version"],
    )
    cols = ["store", "key", *ORDER, "wv", "ok_time", *(["e"] if with_effect else [])]
    return by_value.select(*cols).unionByName(by_delete.select(*cols))
