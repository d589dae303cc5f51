"""Event sourcing in Spark: `projection-mismatch` and `invariant-violation`.

Same semantics as checkers/reference/eventsourcing.py: the fold is one aggregation per
aggregate, the running sum one window per aggregate in version order. Only the segment
headers (one per writer process) and the projection store names reach the driver.
The running sum's window carries narrow columns: the violations alone get their events
back, by a join (broadcast by adaptive execution while they are few).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from checkers.anomaly import SPARK_DDL
from checkers.reference.eventsourcing import PROJECTION_PREFIX, Bounds, bounds
from checkers.spark.common import (
    ORDER,
    ROW_ID,
    attach_events,
    evidence_column,
    final_states,
    state_stores,
    timed_event,
    with_row_id,
)
from harness.history.schema import COLUMNS, Event, EventType, MsgAction

CHECKER = "eventsourcing"


def _as_int(text: Column) -> Column:
    """The integer a text spells (signed decimal digits, 64-bit), else null."""
    return F.when(text.rlike("^[+-]?[0-9]+$"), text.try_cast("bigint"))


def _log(events: DataFrame) -> DataFrame:
    """The event-sourcing events, with their integer `delta` (null when not one)."""
    channel = F.col("channel")
    return events.filter(
        (F.col("type") == EventType.MSG)
        & (F.col("action") == MsgAction.PRODUCE)
        & F.col("key").isNotNull()
        & ((channel == "events") | channel.startswith("events:"))
    ).withColumn("delta", _as_int(F.col("value")))


def check(events: DataFrame) -> DataFrame:
    """Projection mismatches against the fold of the log, then invariant violations."""
    return _mismatches(events, _log(events)).unionByName(_violations(with_row_id(events)))


def _mismatches(events: DataFrame, log: DataFrame) -> DataFrame:
    spark = events.sparkSession
    stores = [
        r.store
        for r in state_stores(events).filter(F.col("store").startswith(PROJECTION_PREFIX)).collect()
    ]
    if not stores:
        return spark.createDataFrame([], SPARK_DDL)
    folds = log.groupBy("key").agg(
        F.sum(F.coalesce("delta", F.lit(0))).alias("fold"),
        F.count("*").alias("n"),
        F.max("time").alias("last"),
        F.collect_list(timed_event()).alias("appended"),
    )
    held = final_states(events).filter(F.col("store").isin(stores))
    names = spark.createDataFrame([(s,) for s in stores], "store string")
    judged = (
        F.broadcast(names)
        .crossJoin(folds)
        .join(held, ["store", "key"], "full")
        .withColumns({"fold": F.coalesce("fold", F.lit(0)), "n": F.coalesce("n", F.lit(0))})
        .filter(~F.coalesce(_as_int(F.col("value")) == F.col("fold"), F.lit(False)))
    )
    shown = F.when(F.col("value").isNull(), "nothing").otherwise(
        F.format_string("'%s'", F.col("value"))
    )
    return judged.select(
        F.lit(CHECKER).alias("checker"),
        F.lit("projection-mismatch").alias("kind"),
        "store",
        "key",
        F.lit(None).cast("string").alias("consumer"),
        F.coalesce("time", "last").alias("time"),
        F.format_string(
            "%s holds %s for '%s', the fold of its %d events is %d",
            F.col("store"),
            shown,
            F.col("key"),
            F.col("n"),
            F.col("fold"),
        ).alias("detail"),
        evidence_column(
            F.coalesce("appended", F.array().cast(folds.schema["appended"].dataType)),
            F.when(F.col("ev").isNotNull(), F.array("ev")).otherwise(
                F.array().cast(ArrayType(held.schema["ev"].dataType))
            ),
        ).alias("evidence"),
    )


def _violations(events: DataFrame) -> DataFrame:
    # Headers: one per writer process, a few rows.
    headers = events.filter(F.col("type") == EventType.HEADER).select(*COLUMNS).collect()
    limits = bounds(Event(**r.asDict()) for r in headers)
    if limits is None:
        return events.sparkSession.createDataFrame([], SPARK_DDL)
    in_order = (
        Window.partitionBy("key")
        .orderBy(F.col("version").asc_nulls_first(), *ORDER)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    delta = F.coalesce("delta", F.lit(0))
    total = F.col("total")
    broken = (
        _log(events)
        .select("key", "version", *ORDER, "delta", ROW_ID)
        .withColumn("total", F.sum(delta).over(in_order))
        .filter(_broken(limits, total, delta))
        .select("total", ROW_ID)
    )
    event = F.col("ev.e")
    return attach_events(broken, events, ev=ROW_ID).select(
        F.lit(CHECKER).alias("checker"),
        F.lit("invariant-violation").alias("kind"),
        F.lit(None).cast("string").alias("store"),
        event["key"].alias("key"),
        F.lit(None).cast("string").alias("consumer"),
        event["time"].alias("time"),
        F.format_string(
            "'%s' reached %d with %s at version %s (bounds min=%s, max=%s)",
            event["key"],
            total,
            event["value"],
            event["version"],
            F.lit(str(limits.low)),
            F.lit(str(limits.high)),
        ).alias("detail"),
        F.to_json(F.array(event)).alias("evidence"),
    )


def _broken(limits: Bounds, total: Column, delta: Column) -> Column:
    """Bounds.broken_by as a Column."""
    broken = F.lit(False)
    if limits.low is not None:
        broken = broken | ((total < limits.low) & (delta < 0))
    if limits.high is not None:
        broken = broken | ((total > limits.high) & (delta > 0))
    return broken
