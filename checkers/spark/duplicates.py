"""Duplicates in Spark: deliveries and applies counted per message on narrow columns, in
one shuffle; only the repeated messages' events are gathered, by a join that broadcasts
them while they are few (join_side).

Agrees with checkers.reference.duplicates (see docs/checkers.md).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.spark.common import (
    anomaly_rows,
    evidence_column,
    is_msg,
    join_side,
    timed_event,
)
from harness.history.schema import MsgAction

CHECKER = "duplicates"


def check(events: DataFrame) -> DataFrame:
    """Every (consumer, msg_id) delivered and every (store, msg_id) applied twice or more."""
    deliver = is_msg(MsgAction.DELIVER.value) & F.col("consumer").isNotNull()
    apply = is_msg(MsgAction.APPLY.value) & F.col("store").isNotNull()
    # Deliveries and applies share one aggregation: `who` is the consumer or the store.
    # The names avoid the events' own `kind`, which the join below keeps.
    msgs = events.filter(F.col("msg_id").isNotNull() & (deliver | apply)).withColumns(
        {
            "dup_kind": F.when(deliver, F.lit("duplicate-delivery")).otherwise("duplicate-apply"),
            "who": F.when(deliver, F.col("consumer")).otherwise(F.col("store")),
        }
    )
    group = ["dup_kind", "who", "msg_id"]
    repeated, hint = join_side(
        msgs.groupBy(*group).count().filter(F.col("count") > 1).select(*group)
    )
    # Repeated messages are few: their events are found by scanning, not shuffling, all.
    per_msg = (
        msgs.join(hint(repeated), group)
        .groupBy(*group)
        .agg(F.array_sort(F.collect_list(timed_event())).alias("evs"))
    )
    second = F.col("evs")[1]
    is_delivery = F.col("dup_kind") == "duplicate-delivery"
    return anomaly_rows(
        per_msg,
        CHECKER,
        kind=F.col("dup_kind"),
        store=F.when(~is_delivery, F.col("who")),
        key=second["e"]["key"],
        consumer=F.when(is_delivery, F.col("who")).otherwise(second["e"]["consumer"]),
        time=second["t"],
        detail=F.format_string(
            "%s %s %d times to %s",
            F.col("msg_id"),
            F.when(is_delivery, F.lit("delivered")).otherwise(F.lit("applied")),
            F.size("evs"),
            F.col("who"),
        ),
        evidence=evidence_column(F.col("evs")),
    )
