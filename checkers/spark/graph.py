"""Graph in Spark: `contradictory-order`, prefiltered in Spark, cycles found by networkx.

A cycle exists exactly when some effect on the store carries a lower version than the
effect before it (an inversion, like a stale overwrite): the forward edges alone climb
the version order. Spark finds those (store, key) pairs with one window; only their
writes and effects reach the driver, where checkers.reference.graph.contradiction
builds the DiGraph and picks the smallest cycle, so both versions agree by construction.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.anomaly import ANOMALY_COLUMNS, SPARK_DDL
from checkers.reference.graph import contradiction
from checkers.spark.common import ORDER, carried_writes, event_struct, ok_source_writes
from harness.history.schema import Event, EventType


def check(events: DataFrame, carried: DataFrame | None = None) -> DataFrame:
    """Every (store, key) whose effect order contradicts the source's version order.

    `carried` is carried_writes(events) when the caller has it already (analyze computes
    it once for this checker and the staleness lag).
    """
    mapped = carried if carried is not None else carried_writes(events)
    in_time = Window.partitionBy("store", "key").orderBy(*ORDER)
    steps_back = F.coalesce(F.col("wv") < F.lag("wv").over(in_time), F.lit(False))
    flagged = (
        mapped.withColumn("back", steps_back).filter("back").select("store", "key").distinct()
    ).collect()
    spark = events.sparkSession
    if not flagged:
        return spark.createDataFrame([], SPARK_DDL)
    # Bounded: only the flagged keys' events are matched again, now with the effects
    # themselves, and reach the driver, each (store, key) with its effects and then its
    # source writes; networkx works on their few hundred edges.
    pairs = spark.createDataFrame(sorted({tuple(r) for r in flagged}), "store string, key string")
    keys = pairs.select(F.col("key").alias("wk")).distinct()
    mine = events.join(F.broadcast(keys), F.col("key") == F.col("wk"), "left_semi")
    applied = (
        carried_writes(mine, with_effect=True)
        .join(F.broadcast(pairs), ["store", "key"], "left_semi")
        .groupBy("store", "key")
        .agg(F.array_sort(F.collect_list(F.struct(*ORDER, "wv", "e"))).alias("applied"))
        .collect()
    )
    # The chain holds the writes an effect can carry: with a value, or deletes.
    writes = ok_source_writes(mine.filter(F.col("type") == EventType.OP))
    chains = {
        r["wk"]: [Event(**x["w"].asDict()) for x in r["chain"]]
        for r in writes.filter(F.col("value").isNotNull() | (F.col("f") == "delete"))
        .groupBy(F.col("key").alias("wk"))
        .agg(
            F.array_sort(
                F.collect_list(F.struct(F.col("version").alias("wv"), event_struct().alias("w")))
            ).alias("chain")
        )
        .collect()
    }
    found = []
    for r in applied:
        sequence = [(x["wv"], Event(**x["e"].asDict())) for x in r["applied"]]
        anomaly = contradiction(r["store"], r["key"], chains[r["key"]], sequence)
        if anomaly is not None:
            found.append(tuple(getattr(anomaly, c) for c in ANOMALY_COLUMNS))
    return spark.createDataFrame(found, SPARK_DDL)
