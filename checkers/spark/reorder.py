"""Reorder in Spark: two window passes, one per grouping family.

Version regressions (`reorder-delivery`, `stale-overwrite`) share one window over
(kind, group, key) in time order. Offsets (`nonmonotonic-poll`, `poll-skip`,
`inconsistent-offset`) are all judged within (channel, partition): one shuffle on those,
then windows and aggregations that refine that partitioning without another.
Agrees with checkers.reference.reorder (see docs/checkers.md).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.spark.common import (
    ORDER,
    anomaly_rows,
    evidence_column,
    in_order,
    is_effect,
    is_msg,
    timed_event,
)
from harness.history.schema import MsgAction

CHECKER = "reorder"


def check(events: DataFrame) -> DataFrame:
    """Every reorder anomaly of the history."""
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
        "store",
        "consumer",
        timed_event().alias("ev"),
    )
    earlier = in_order("kind", "g1", "g2", "key").rowsBetween(Window.unboundedPreceding, -1)
    top = F.max(F.struct("version", "ev")).over(earlier)
    flagged = versioned.withColumn("top", top).filter(F.col("version") < F.col("top.version"))
    is_delivery = F.col("kind") == "reorder-delivery"
    return anomaly_rows(
        flagged,
        CHECKER,
        kind=F.col("kind"),
        store=F.when(~is_delivery, F.col("store")),
        key=F.col("key"),
        consumer=F.col("consumer"),
        time=F.col("time"),
        detail=F.format_string(
            "'%s' version %d %s after version %d",
            F.col("key"),
            F.col("version"),
            F.when(is_delivery, F.lit("delivered")).otherwise(F.lit("applied")),
            F.col("top.version"),
        ),
        evidence=evidence_column(F.array(F.col("top.ev"), F.col("ev"))),
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
        "key",
        *ORDER,
        timed_event().alias("ev"),
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
    return _polls(logged).unionByName(_inconsistent(logged))


def _polls(logged: DataFrame) -> DataFrame:
    polls = logged.filter((F.col("action") == "deliver") & F.col("consumer").isNotNull())
    instance = in_order("channel", "partition", "consumer", "process")
    polls = polls.withColumn("prev", F.lag(F.struct("offset", "ev")).over(instance)).filter(
        F.col("prev").isNotNull()
    )
    back = F.col("offset") <= F.col("prev.offset")
    skip = ~back & (F.col("produced_below") > F.col("prev.offset"))
    flagged = polls.filter(back | skip)
    where = F.format_string("%s[%s]", F.col("channel"), F.col("partition"))
    detail = F.format_string(
        "%s read %s offset %d after %d",
        F.col("consumer"),
        where,
        F.col("offset"),
        F.col("prev.offset"),
    )
    return anomaly_rows(
        flagged,
        CHECKER,
        kind=F.when(back, F.lit("nonmonotonic-poll")).otherwise(F.lit("poll-skip")),
        store=F.lit(None),
        key=F.col("key"),
        consumer=F.col("consumer"),
        time=F.col("time"),
        detail=F.when(back, detail).otherwise(
            F.concat(
                detail,
                F.lit(", skipping produced offset "),
                F.col("produced_below").cast("string"),
            )
        ),
        evidence=evidence_column(F.array(F.col("prev.ev"), F.col("ev"))),
    )


def _inconsistent(logged: DataFrame) -> DataFrame:
    coords = ("channel", "partition", "offset")
    whole = in_order(*coords).rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    ids = logged.filter(F.col("msg_id").isNotNull()).withColumn(
        "first_id", F.first("msg_id").over(whole)
    )
    other = F.col("msg_id") != F.col("first_id")
    # Most coordinates hold one msg_id: drop them before collecting evidence.
    mixed = ids.withColumn("mixed", F.max(other).over(whole)).filter(F.col("mixed"))
    per_coords = mixed.groupBy(*coords).agg(
        F.min(F.when(other, F.col("time"))).alias("time"),
        F.array_sort(F.collect_set("msg_id")).alias("ids"),
        F.collect_list("ev").alias("evs"),
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
