"""Divergence in Spark: the `missing`, `extra`, `stale`, `phantom` kinds of docs/checkers.md.

Same semantics as checkers/reference/divergence.py. Judging takes one shuffle: each
key's final states and committed values are grouped once and judged per store with
array functions, no Python on the executors; states carry a row id, not their event.
Evidence takes one join of the anomalies (broadcast while few: join_side)
with the events: their final states by row id and their keys' writes."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.anomaly import SPARK_DDL
from checkers.spark.common import (
    ROW_ID,
    evidence_column,
    is_effect,
    is_source_write,
    join_side,
    state_stores,
    timed_event,
    with_row_id,
)
from harness.history.schema import SOURCE_STORE, EventType, OpPhase

CHECKER = "divergence"


def check(events: DataFrame) -> DataFrame:
    """Every (store, key) whose final value differs from the source's, classified."""
    # The stores with a final state: a handful of names, collected to the driver.
    stores = sorted(r.store for r in state_stores(events).collect())
    derived = [s for s in stores if s != SOURCE_STORE]
    if SOURCE_STORE not in stores or not derived:
        return events.sparkSession.createDataFrame([], SPARK_DDL)

    events = with_row_id(events)
    is_state = (F.col("type") == EventType.STATE) & F.col("store").isNotNull()
    may_commit = is_source_write() & F.col("phase").isin(OpPhase.OK, OpPhase.INFO)
    is_write = may_commit | is_effect()
    stamp = [F.col("time").alias("t"), F.col("writer").alias("w"), F.col("seq").alias("s")]
    per_key = (
        events.filter(
            F.col("type").isin(EventType.STATE, EventType.OP, EventType.MSG)
            & F.col("key").isNotNull()
        )
        .filter(is_state | may_commit)
        .groupBy("key")
        .agg(
            F.collect_list(
                F.when(is_state, F.struct(*stamp, "store", "value", F.col(ROW_ID).alias("r")))
            ).alias("states"),
            F.collect_set(F.when(may_commit, F.col("value"))).alias("committed"),
        )
    )

    def final(store: Column) -> Column:
        """The key's last state event in `store`, or null."""
        return F.try_element_at(
            F.array_sort(F.filter("states", lambda x: x["store"] == store)), F.lit(-1)
        )

    judged = per_key.select(
        "key",
        "committed",
        "states",
        F.explode(F.array(*[F.lit(s) for s in derived])).alias("store"),
        final(F.lit(SOURCE_STORE)).alias("src"),
    ).withColumn("der", final(F.col("store")))
    src_v, der_v = F.col("src.value"), F.col("der.value")
    kind = (
        F.when(der_v.isNull(), "missing")
        .when(src_v.isNull(), "extra")
        .when(F.array_contains("committed", der_v), "stale")
        .otherwise("phantom")
    )
    held = F.when(der_v.isNull(), F.format_string("%s lacks '%s'", "store", "key")).otherwise(
        F.format_string("%s holds '%s' = '%s'", "store", "key", der_v)
    )
    why = F.when(kind == "stale", "an older committed value").when(
        kind == "phantom", "never committed at the source"
    )
    source_says = F.when(src_v.isNull(), "the source does not hold it").otherwise(
        F.format_string("the source holds '%s'", src_v)
    )
    anomalies = judged.filter(
        ~(src_v.isNull() & der_v.isNull()) & ~F.coalesce(src_v == der_v, F.lit(False))
    ).select(
        kind.alias("kind"),
        "store",
        "key",
        F.when(der_v.isNotNull(), F.col("der.t")).otherwise(F.col("src.t")).alias("time"),
        F.concat_ws(", ", held, why, source_says).alias("detail"),
        # The final states shown: those holding a value, one at least.
        F.when(src_v.isNotNull(), F.col("src.r")).alias("src_row"),
        F.when(der_v.isNotNull(), F.col("der.r")).alias("der_row"),
    )
    return _with_evidence(events, is_write, anomalies)


def _with_evidence(events: DataFrame, is_write: Column, anomalies: DataFrame) -> DataFrame:
    """Anomaly rows with their evidence: the final states, then the key's latest source
    writes that may have committed and effects on the store. Only the events of the
    anomalies' final states (`src_row`, `der_row`) and of the anomalous keys' writes are
    gathered, after the judging pass, in one scan."""
    shown, hint = join_side(
        anomalies.select(*[F.col(c).alias("a_" + c) for c in anomalies.columns])
    )
    row = F.col(ROW_ID)
    # The source's writes of a key belong to every store's anomaly on it.
    on = (F.col("key") == F.col("a_key")) & (
        (row == F.col("a_src_row"))
        | (row == F.col("a_der_row"))
        | (is_write & ((F.col("store") == SOURCE_STORE) | (F.col("store") == F.col("a_store"))))
    )
    # The final states come first, the source's before the store's: roles 0, 1, then 2.
    role = F.when(row == F.col("a_src_row"), 0).when(row == F.col("a_der_row"), 1).otherwise(2)
    rows = (
        events.filter(F.col("key").isNotNull())
        .join(hint(shown), on)
        .select(
            *[F.col("a_" + c).alias(c) for c in ("kind", "store", "key", "time", "detail")],
            role.alias("role"),
            timed_event().alias("ev"),
        )
    )
    finals = F.transform(
        F.array_sort(F.collect_list(F.when(F.col("role") < 2, F.struct("role", "ev.e")))),
        lambda x: x["e"],
    )
    return (
        rows.groupBy("store", "key")
        .agg(
            *[F.max(c).alias(c) for c in ("kind", "time", "detail")],
            finals.alias("finals"),
            F.collect_list(F.when(F.col("role") == 2, F.col("ev"))).alias("writes"),
        )
        .select(
            F.lit(CHECKER).alias("checker"),
            "kind",
            "store",
            "key",
            F.lit(None).cast("string").alias("consumer"),
            "time",
            "detail",
            evidence_column(F.col("writes"), F.col("finals")).alias("evidence"),
        )
    )
