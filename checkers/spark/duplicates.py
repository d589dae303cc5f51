"""Duplicates in Spark: deliveries and applies counted per message, in one shuffle.

Agrees with checkers.reference.duplicates (see docs/checkers.md).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.spark.common import (
    ORDER,
    anomaly_rows,
    evidence_column,
    in_order,
    is_msg,
    timed_event,
)
from harness.history.schema import MsgAction

CHECKER = "duplicates"


def check(events: DataFrame) -> DataFrame:
    """Every (consumer, msg_id) delivered and every (store, msg_id) applied twice or more."""
    deliver = is_msg(MsgAction.DELIVER.value) & F.col("consumer").isNotNull()
    apply = is_msg(MsgAction.APPLY.value) & F.col("store").isNotNull()
    # Deliveries and applies share one window: `who` is the consumer or the store.
    msgs = events.filter(F.col("msg_id").isNotNull() & (deliver | apply)).select(
        F.when(deliver, F.lit("duplicate-delivery")).otherwise("duplicate-apply").alias("kind"),
        F.when(deliver, F.col("consumer")).otherwise(F.col("store")).alias("who"),
        "msg_id",
        *ORDER,
        "key",
        "store",
        "consumer",
        timed_event().alias("ev"),
    )
    group = ("kind", "who", "msg_id")
    ordered = in_order(*group)
    # Both windows share partitioning and order: one shuffle, one sort.
    whole = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    repeated = (
        msgs.withColumn("n", F.count(F.lit(1)).over(whole))
        .withColumn("rank", F.row_number().over(ordered))
        .filter(F.col("n") > 1)
    )
    second = F.col("rank") == 2
    per_msg = repeated.groupBy(*group).agg(
        F.first("n").alias("n"),
        F.max(F.when(second, F.col("time"))).alias("time"),
        F.max(F.when(second, F.col("key"))).alias("key"),
        F.max(F.when(second, F.col("consumer"))).alias("consumer"),
        F.collect_list("ev").alias("evs"),
    )
    is_delivery = F.col("kind") == "duplicate-delivery"
    return anomaly_rows(
        per_msg,
        CHECKER,
        kind=F.col("kind"),
        store=F.when(~is_delivery, F.col("who")),
        key=F.col("key"),
        consumer=F.when(is_delivery, F.col("who")).otherwise(F.col("consumer")),
        time=F.col("time"),
        detail=F.format_string(
            "%s %s %d times to %s",
            F.col("msg_id"),
            F.when(is_delivery, F.lit("delivered")).otherwise(F.lit("applied")),
            F.col("n"),
            F.col("who"),
        ),
        evidence=evidence_column(F.col("evs")),
    )
