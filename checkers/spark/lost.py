"""Lost in Spark: produced messages anti-joined with deliveries, source writes with the
effects and skips of every derived store.

Agrees with checkers.reference.lost (see docs/checkers.md and that module's docstring
for which channels a consumer consumes and is done on). Joins carry narrow columns and a
row id; only the lost messages and writes get their whole events back (attach_events).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.spark.common import (
    ORDER,
    ROW_ID,
    anomaly_rows,
    attach_events,
    evidence_column,
    is_effect,
    is_msg,
    is_source_write,
    with_row_id,
)
from harness.history.schema import SOURCE_STORE, EventType, Mark, MsgAction, OpPhase

CHECKER = "lost"


def check(events: DataFrame) -> DataFrame:
    """Every lost message (per consumer) and every lost write (per derived store)."""
    events = with_row_id(events)
    return _lost_messages(events).unionByName(_lost_writes(events))


def notes(events: DataFrame) -> dict[str, int]:
    """Counts of the notes: `unseen-message` and `recovered-write`."""
    events = with_row_id(events)
    unseen = _undelivered(events).filter(~F.col("done")).select(F.lit("unseen-message"))
    recovered = _recovered_writes(events).select(F.lit("recovered-write"))
    # One job for both counts; a note nobody shows up in counts zero.
    rows = unseen.union(recovered).toDF("note").groupBy("note").count().collect()
    counts = {"unseen-message": 0, "recovered-write": 0}
    counts.update({r["note"]: int(r["count"]) for r in rows})
    return counts


def _consumer_channels(events: DataFrame) -> DataFrame:
    """(consumer, channel, done): the channels each consumer consumes (small)."""
    delivered_on = (
        events.filter(is_msg(MsgAction.DELIVER.value) & F.col("consumer").isNotNull())
        .filter(F.col("channel").isNotNull())
        .select("consumer", "channel")
        .distinct()
    )
    marks = events.filter(
        (F.col("type") == EventType.MARK)
        & (F.col("kind") == Mark.CONSUMER_DONE)
        & F.col("consumer").isNotNull()
    ).select("consumer", "channel")
    marked = marks.filter(F.col("channel").isNotNull())
    # A mark without a channel: done on every channel the consumer has a deliver on.
    everywhere = delivered_on.join(marks.filter(F.col("channel").isNull()), "consumer", "left_semi")
    return (
        delivered_on.withColumn("done", F.lit(False))
        .unionByName(marked.withColumn("done", F.lit(True)))
        .unionByName(everywhere.withColumn("done", F.lit(True)))
        .groupBy("consumer", "channel")
        .agg(F.max("done").alias("done"))
    )


def _undelivered_produces(events: DataFrame) -> DataFrame:
    """(consumer, msg_id, done, channel, key, time, writer, seq, ROW_ID): each produce of
    a message on a channel the consumer consumes, the message never delivered to it;
    `done` when the consumer is done on that channel."""
    produced = events.filter(
        is_msg(MsgAction.PRODUCE.value) & F.col("channel").isNotNull() & F.col("msg_id").isNotNull()
    ).select("channel", "msg_id", "key", *ORDER, ROW_ID)
    delivered = events.filter(
        is_msg(MsgAction.DELIVER.value)
        & F.col("consumer").isNotNull()
        & F.col("msg_id").isNotNull()
    ).select("consumer", "msg_id")
    return produced.join(F.broadcast(_consumer_channels(events)), "channel").join(
        delivered, ["consumer", "msg_id"], "left_anti"
    )


def _undelivered(events: DataFrame) -> DataFrame:
    """(consumer, msg_id, done): messages produced on a channel the consumer consumes and
    never delivered to it; `done` when one of those channels is done."""
    return (
        _undelivered_produces(events).groupBy("consumer", "msg_id").agg(F.max("done").alias("done"))
    )


def _lost_messages(events: DataFrame) -> DataFrame:
    # A message is lost to a consumer by its produces on done channels, which alone are
    # its evidence: few rows, given their events before grouping.
    done = _undelivered_produces(events).filter(F.col("done"))
    lost = (
        attach_events(done, events, ev=ROW_ID)
        .groupBy("consumer", "msg_id")
        .agg(
            F.min(F.struct(*ORDER, "key", "channel")).alias("first"),
            F.collect_list("ev").alias("evs"),
        )
    )
    return anomaly_rows(
        lost,
        CHECKER,
        kind=F.lit("lost-message"),
        store=F.lit(None),
        key=F.col("first.key"),
        consumer=F.col("consumer"),
        time=F.col("first.time"),
        detail=F.format_string(
            "%s produced on %s, never delivered to %s",
            F.col("msg_id"),
            F.col("first.channel"),
            F.col("consumer"),
        ),
        evidence=evidence_column(F.col("evs")),
    )


def _delete_version() -> Column:
    """A write is known by (key, value); a delete, which has no value, by (key, version)."""
    return F.when(F.col("value").isNull(), F.col("version"))


def _carries(prefix: str) -> Column:
    """The carried write of a row equals that of the `prefix`ed columns (nulls equal)."""
    return (
        (F.col("key") == F.col(f"{prefix}key"))
        & F.col("value").eqNullSafe(F.col(f"{prefix}value"))
        & F.col("deleted").eqNullSafe(F.col(f"{prefix}deleted"))
    )


def _reached(events: DataFrame) -> DataFrame:
    """(store, key, value, deleted, effect): what reached a derived store, applied or
    skipped."""
    skip = is_msg(MsgAction.SKIP.value) & F.col("store").isNotNull()
    return events.filter(
        F.col("key").isNotNull() & (is_effect() | (skip & (F.col("store") != SOURCE_STORE)))
    ).select(
        "store", "key", "value", _delete_version().alias("deleted"), is_effect().alias("effect")
    )


def _source_writes(events: DataFrame, phase: OpPhase) -> DataFrame:
    return events.filter(
        is_source_write() & (F.col("phase") == phase) & F.col("key").isNotNull()
    ).select("key", "value", _delete_version().alias("deleted"), ROW_ID)


def _lost_writes(events: DataFrame) -> DataFrame:
    reached = _reached(events)
    stores = reached.filter(F.col("effect")).select("store").distinct()
    quiesced = events.filter(
        (F.col("type") == EventType.MARK) & (F.col("kind") == Mark.QUIESCED)
    ).select(F.lit(1).alias("quiesced"))
    writes = _source_writes(events, OpPhase.OK).join(
        F.broadcast(quiesced.limit(1)), how="left_semi"
    )
    seen = reached.select(*[F.col(c).alias(f"r_{c}") for c in ("store", "key", "value", "deleted")])
    lost = writes.crossJoin(F.broadcast(stores)).join(
        seen, (F.col("store") == F.col("r_store")) & _carries("r_"), "left_anti"
    )
    shown = attach_events(lost.select("store", ROW_ID), events, ev=ROW_ID)
    write = F.col("ev.e")
    return anomaly_rows(
        shown,
        CHECKER,
        kind=F.lit("lost-write"),
        store=F.col("store"),
        key=write["key"],
        consumer=F.lit(None),
        time=write["time"],
        detail=F.format_string(
            "%s of '%s' = '%s' never reached %s",
            write["f"],
            write["key"],
            write["value"],
            F.col("store"),
        ),
        evidence=evidence_column(F.array(F.col("ev"))),
    )


def _recovered_writes(events: DataFrame) -> DataFrame:
    """`info` source writes that reached some derived store (applied or skipped)."""
    anywhere = (
        _reached(events)
        .select(*[F.col(c).alias(f"r_{c}") for c in ("key", "value", "deleted")])
        .distinct()
    )
    return _source_writes(events, OpPhase.INFO).join(anywhere, _carries("r_"), "left_semi")
