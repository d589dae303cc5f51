"""Reorder in Spark: two window passes, one per grouping family.

Version regressions (`reorder-delivery`, `stale-overwrite`) share one window over
(kind, group, key) in time order. Offsets (`nonmonotonic-poll`, `poll-skip`,
`inconsistent-offset`) are all judged within (channel, partition): one shuffle on those,
then windows and aggregations that refine that partitioning without another.
Windows carry narrow columns and a row id; only the flagged rows get their whole events
back (attach_events). Agrees with checkers.reference.reorder (see docs/checkers.md).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.spark.common import (
    ORDER,
    ROW_ID,
    anomaly_rows,
    attach_events,
    evidence_column,
    in_order,
    is_effect,
    is_msg,
    with_row_id,
)
from harness.history.schema import MsgAction

CHECKER = "reorder"


def check(events: DataFrame) -> DataFrame:
    """Every reorder anomaly of the history."""
    events = with_row_id(events)
    return _regressions(events).unionByName(_offsets(events))


def _regressions(events: DataFrame) -> DataFrame:
    """Events whose version is below the highest version earlier in their group."""
    deliver = is_msg(MsgAction.DELIVER.value) & F.col("consumer").isNotNull()
    versioned = events.filter(
        F.col("key").isNotNull() & F.col("version").isNotNull() & (deliver | is_effect())
    ).select(
        F.when(deliver, F.lit("reorder-delivery")).otherwise("stale-overwrite").alias("kind"),
        # A delivery is judged within its consumer instance, an effect within its store.
        F.when(deliver, F.col("consumer")).otherwise(F.col("store")).alias("g1"),
        F.when(deliver, F.col("process")).alias("g2"),
        "key",
        "version",
        *ORDER,
        ROW_ID,
    )
    earlier = in_order("kind", "g1", "g2", "key").rowsBetween(Window.unboundedPreceding, -1)
    # The latest event of the highest version so far; the row id breaks full ties.
    top = F.max(F.struct("version", *ORDER, ROW_ID)).over(earlier)
    flagged = (
        versioned.withColumn("top", top)
        .filter(F.col("version") < F.col("top.version"))
        .select(
            "kind",
            "version",
            ROW_ID,
            F.col("top.version").alias("top_version"),
            F.col(f"top.{ROW_ID}").alias("top_row"),
        )
    )
    shown = attach_events(flagged, events, ev=ROW_ID, top_ev="top_row")
    event = F.col("ev.e")
    is_delivery = F.col("kind") == "reorder-delivery"
    return anomaly_rows(
        shown,
        CHECKER,
        kind=F.col("kind"),
        store=F.when(~is_delivery, event["store"]),
        key=event["key"],
        consumer=event["consumer"],
        time=event["time"],
        detail=F.format_string(
            "'%s' version %d %s after version %d",
            event["key"],
            F.col("version"),
            F.when(is_delivery, F.lit("delivered")).otherwise(F.lit("applied")),
            F.col("top_version"),
        ),
        evidence=evidence_column(F.array(F.col("top_ev"), F.col("ev"))),
    )


def _offsets(events: DataFrame) -> DataFrame:
    """nonmonotonic-poll, poll-skip and inconsistent-offset."""
    produce = is_msg(MsgAction.PRODUCE.value)
    deliver = is_msg(MsgAction.DELIVER.value)
    logged = events.filter(
        (produce | deliver) & F.col("channel").isNotNull() & F.col("offset").isNotNull()
    ).select(
        "channel",
        "partition",
        "offset",
        "action",
        "msg_id",
        "consumer",
        "process",
        *ORDER,
        ROW_ID,
    )
    # The highest produced offset below each row's offset, over the offsets of its
    # channel and partition: a poll from p to o skipped a message iff that is above p.
    below = (
        Window.partitionBy("channel", "partition")
        .orderBy("offset")
        .rangeBetween(Window.unboundedPreceding, -1)
    )
    logged = logged.withColumn(
        "produced_below", F.max(F.when(F.col("action") == "produce", F.col("offset"))).over(below)
    )
    return _polls(logged, events).unionByName(_inconsistent(logged, events))


def _polls(logged: DataFrame, events: DataFrame) -> DataFrame:
    polls = logged.filter((F.col("action") == "deliver") & F.col("consumer").isNotNull())
    instance = in_order("channel", "partition", "consumer", "process")
    polls = polls.withColumn("prev", F.lag(F.struct("offset", ROW_ID)).over(instance)).filter(
        F.col("prev").isNotNull()
    )
    back = F.col("offset") <= F.col("prev.offset")
    skip = ~back & (F.col("produced_below") > F.col("prev.offset"))
    flagged = polls.filter(back | skip).select(
        "channel",
        "partition",
        "offset",
        "consumer",
        "time",
        "produced_below",
        back.alias("back"),
        ROW_ID,
        F.col("prev.offset").alias("prev_offset"),
        F.col(f"prev.{ROW_ID}").alias("prev_row"),
    )
    shown = attach_events(flagged, events, ev=ROW_ID, prev_ev="prev_row")
    back = F.col("back")
    where = F.format_string("%s[%s]", F.col("channel"), F.col("partition"))
    detail = F.format_string(
        "%s read %s offset %d after %d",
        F.col("consumer"),
        where,
        F.col("offset"),
        F.col("prev_offset"),
    )
    return anomaly_rows(
        shown,
        CHECKER,
        kind=F.when(back, F.lit("nonmonotonic-poll")).otherwise(F.lit("poll-skip")),
        store=F.lit(None),
        key=F.col("ev.e.key"),
        consumer=F.col("consumer"),
        time=F.col("time"),
        detail=F.when(back, detail).otherwise(
            F.concat(
                detail,
                F.lit(", skipping produced offset "),
                F.col("produced_below").cast("string"),
            )
        ),
        evidence=evidence_column(F.array(F.col("prev_ev"), F.col("ev"))),
    )


def _inconsistent(logged: DataFrame, events: DataFrame) -> DataFrame:
    coords = ("channel", "partition", "offset")
    whole = in_order(*coords).rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    ids = logged.filter(F.col("msg_id").isNotNull()).withColumn(
        "first_id", F.first("msg_id").over(whole)
    )
    other = F.col("msg_id") != F.col("first_id")
    # Most coordinates hold one msg_id: drop them before collecting evidence.
    mixed = (
        ids.withColumn("mixed", F.max(other).over(whole))
        .filter(F.col("mixed"))
        .select(*coords, "msg_id", "time", other.alias("other"), ROW_ID)
    )
    per_coords = (
        attach_events(mixed, events, ev=ROW_ID)
        .groupBy(*coords)
        .agg(
            F.min(F.when(F.col("other"), F.col("time"))).alias("time"),
            F.array_sort(F.collect_set("msg_id")).alias("ids"),
            F.collect_list("ev").alias("evs"),
        )
    )
    return anomaly_rows(
        per_coords,
        CHECKER,
        kind=F.lit("inconsistent-offset"),
        store=F.lit(None),
        key=F.lit(None),
        consumer=F.lit(None),
        time=F.col("time"),
        detail=F.format_string(
            "%s[%s] offset %d holds %s",
            F.col("channel"),
            F.col("partition"),
            F.col("offset"),
            F.array_join(F.col("ids"), ", "),
        ),
        evidence=evidence_column(F.col("evs")),
    )
