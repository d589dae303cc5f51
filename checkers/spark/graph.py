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


def check(events: DataFrame) -> DataFrame:
    """Every (store, key) whose effect order contradicts the source's version order."""
    # The chain holds the writes an effect can carry: with a value, or deletes.
    writes = ok_source_writes(events.filter(F.col("type") == EventType.OP))
    writes = writes.filter(F.col("value").isNotNull() | (F.col("f") == "delete")).select(
        F.col("key").alias("wk"), F.col("version").alias("wv"), event_struct().alias("w")
    )
    mapped = carried_writes(events).select("store", "key", *ORDER, "wv", "e")
    in_time = Window.partitionBy("store", "key").orderBy(*ORDER)
    steps_back = F.coalesce(F.col("wv") < F.lag("wv").over(in_time), F.lit(False))
    # Bounded: only the (store, key) pairs with an inversion reach the driver, each with
    # its effects and then its source writes; networkx works on their few hundred edges.
    applied = (
        mapped.withColumn("back", steps_back)
        .withColumn("flagged", F.max("back").over(Window.partitionBy("store", "key")))
        .filter("flagged")
        .groupBy("store", "key")
        .agg(F.array_sort(F.collect_list(F.struct(*ORDER, "wv", "e"))).alias("applied"))
        .collect()
    )
    if not applied:
        return events.sparkSession.createDataFrame([], SPARK_DDL)
    keys = events.sparkSession.createDataFrame(sorted({(r["key"],) for r in applied}), "wk string")
    chains = {
        r["wk"]: [Event(**x["w"].asDict()) for x in r["chain"]]
        for r in writes.join(F.broadcast(keys), "wk")
        .groupBy("wk")
        .agg(F.array_sort(F.collect_list(F.struct("wv", "w"))).alias("chain"))
        .collect()
    }
    found = []
    for r in applied:
        sequence = [(x["wv"], Event(**x["e"].asDict())) for x in r["applied"]]
        anomaly = contradiction(r["store"], r["key"], chains[r["key"]], sequence)
        if anomaly is not None:
            found.append(tuple(getattr(anomaly, c) for c in ANOMALY_COLUMNS))
    return events.sparkSession.createDataFrame(found, SPARK_DDL)
