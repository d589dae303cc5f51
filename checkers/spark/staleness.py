"""Staleness in Spark: `ryw-violation` and the lag metrics of docs/checkers.md.

Same semantics as checkers/reference/staleness.py. A read's own latest write is found
with one window per (process, key) over writes and read invocations in time order, not
with a range join; values become versions through equi-joins on (key, value).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.spark.common import (
    carried_writes,
    event_struct,
    evidence_column,
    is_source_write,
    ok_source_writes,
)
from harness.history.schema import EventType, OpPhase

CHECKER = "staleness"
PERCENTILES = {"p50_ms": 0.5, "p95_ms": 0.95, "p99_ms": 0.99}


def _is_read() -> Column:
    return (
        (F.col("type") == EventType.OP)
        & (F.col("f") == "read")
        & F.col("key").isNotNull()
        & F.col("store").isNotNull()
        & F.col("process").isNotNull()
        & F.col("op_id").isNotNull()
    )


def check(events: DataFrame) -> DataFrame:
    """Every `ok` read that returned something older than its process's own write."""
    ops = events.filter(F.col("type") == EventType.OP)
    writes = ok_source_writes(ops)
    reads = ops.filter(_is_read())
    invoked = (
        reads.filter(F.col("phase") == OpPhase.INVOKE)
        .groupBy("process", "op_id")
        .agg(F.min_by(event_struct(), F.col("time")).alias("inv"))
    )
    done = reads.filter(F.col("phase") == OpPhase.OK).join(invoked, ["process", "op_id"])
    # Writes and read invocations of one (process, key) in time order; at equal times the
    # write comes first, since a process's write completes before its next op starts.
    timeline = (
        writes.withColumn("inv", F.lit(None).cast(invoked.schema["inv"].dataType))
        .withColumns({"at": F.col("time"), "rank": F.lit(0)})
        .unionByName(done.withColumns({"at": F.col("inv.time"), "rank": F.lit(1)}))
    )
    before = (
        Window.partitionBy("process", "key")
        .orderBy("at", "rank")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    own = F.when(
        F.col("rank") == 0, F.struct(F.col("version").alias("v"), event_struct().alias("e"))
    )
    mine = (
        timeline.withColumn("mine", F.max(own).over(before))
        .filter((F.col("rank") == 1) & F.col("mine").isNotNull())
        .select(
            event_struct().alias("r"),
            "inv",
            F.col("mine.v").alias("v"),
            F.col("mine.e").alias("w"),
        )
    )
    by_value = writes.filter(F.col("value").isNotNull()).select(
        F.col("key").alias("k"), F.col("value").alias("val"), F.col("version").alias("seen")
    )
    deletes = (
        ops.filter(is_source_write() & (F.col("f") == "delete") & F.col("key").isNotNull())
        .groupBy("key")
        .agg(
            F.max(F.when(F.col("phase") == OpPhase.OK, F.col("version"))).alias("newest"),
            F.max(F.col("phase") == OpPhase.INFO).alias("unsure"),
        )
        .select(F.col("key").alias("dk"), "newest", "unsure")
    )
    judged = (
        mine.join(
            by_value, (F.col("r.key") == F.col("k")) & (F.col("r.value") == F.col("val")), "left"
        )
        .join(deletes, F.col("r.key") == F.col("dk"), "left")
        .withColumn(
            "seen",
            F.when(F.col("r.value").isNotNull(), F.col("seen")).when(
                ~F.coalesce("unsure", F.lit(False)), F.coalesce("newest", F.lit(0))
            ),
        )
        .filter(F.col("seen") < F.col("v"))
    )
    timed = F.array(
        *[
            F.struct(
                c["time"].alias("t"), c["writer"].alias("w"), c["seq"].alias("s"), c.alias("e")
            )
            for c in (F.col("w"), F.col("inv"), F.col("r"))
        ]
    )
    return judged.select(
        F.lit(CHECKER).alias("checker"),
        F.lit("ryw-violation").alias("kind"),
        F.col("r.store").alias("store"),
        F.col("r.key").alias("key"),
        F.lit(None).cast("string").alias("consumer"),
        F.col("r.time").alias("time"),
        F.format_string(
            "%s read '%s' from %s = '%s' (version %d) after its own write of version %d",
            F.col("r.process"),
            F.col("r.key"),
            F.col("r.store"),
            F.col("r.value"),
            F.col("seen"),
            F.col("v"),
        ).alias("detail"),
        evidence_column(timed).alias("evidence"),
    )


def _lags(carried: DataFrame) -> DataFrame:
    """(store, ok_time, lag_ms) from carried_writes: every `ok` source write's first effect
    on each store; an effect seen before the write's `ok` counts 0, as in the reference."""
    return (
        carried.groupBy("store", "key", "wv")
        .agg(F.min("time").alias("reached"), F.first("ok_time").alias("ok_time"))
        .select(
            "store",
            "ok_time",
            (F.greatest(F.col("reached") - F.col("ok_time"), F.lit(0)) / 1e6).alias("lag_ms"),
        )
    )


def lag(events: DataFrame, carried: DataFrame | None = None) -> dict[str, dict[str, float | int]]:
    """{store: {count, p50_ms, p95_ms, p99_ms, max_ms}}: one small row per store.

    `carried` is carried_writes(events) when the caller has it already.
    """
    qs = F.percentile_approx("lag_ms", list(PERCENTILES.values()))
    per_store = (
        _lags(carried if carried is not None else carried_writes(events))
        .groupBy("store")
        .agg(F.count("*").alias("count"), qs.alias("qs"), F.max("lag_ms").alias("max_ms"))
    )
    out: dict[str, dict[str, float | int]] = {}
    for r in per_store.collect():
        stats: dict[str, float | int] = {"count": r["count"]}
        stats.update(zip(PERCENTILES, r["qs"], strict=True))
        stats["max_ms"] = r["max_ms"]
        out[r["store"]] = stats
    return dict(sorted(out.items()))


def lag_series(
    events: DataFrame, carried: DataFrame | None = None, t0_ns: int | None = None
) -> DataFrame:
    """(store, second, count, p50_ms, max_ms) per second of the run, by the write's `ok`
    time in whole seconds since the first event: a few rows per second, for plots.

    `carried` is carried_writes(events) and `t0_ns` the first event's time when the
    caller has them already.
    """
    lags = _lags(carried if carried is not None else carried_writes(events))
    if t0_ns is None:
        lags = lags.crossJoin(F.broadcast(events.agg(F.min("time").alias("t0"))))
    t0 = F.col("t0") if t0_ns is None else F.lit(t0_ns)
    second = F.floor((F.col("ok_time") - t0) / 1e9).cast("bigint")
    return (
        lags.groupBy("store", second.alias("second"))
        .agg(
            F.count("*").alias("count"),
            F.percentile_approx("lag_ms", 0.5).alias("p50_ms"),
            F.max("lag_ms").alias("max_ms"),
        )
        .orderBy("store", "second")
    )
