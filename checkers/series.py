"""series.json: per-time-bucket aggregates for the report, computed in Spark.

Only aggregates reach the driver (at most MAX_BUCKETS buckets per series and group), so
the file stays small whatever the history's size. Format: docs/analysis.md.
"""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from harness.history.schema import EventType, MsgAction, OpPhase

MAX_BUCKETS = 1200
NS = 1_000_000_000
_COMPLETIONS = [OpPhase.OK.value, OpPhase.FAIL.value, OpPhase.INFO.value]


def bucket_seconds(t0_ns: int, t1_ns: int) -> int:
    """1 second, widened to a whole number of seconds so a run has <= MAX_BUCKETS."""
    span_s = max(0, t1_ns - t0_ns) / NS
    return max(1, math.ceil(span_s / MAX_BUCKETS))


def _bucket(time: Column, t0_ns: int, bucket_s: int) -> Column:
    """The bucket's start, in seconds since t0."""
    return (F.floor((time - F.lit(t0_ns)) / F.lit(bucket_s * NS)) * bucket_s).cast("long")


def _seconds(time: Column, t0_ns: int) -> Column:
    return F.round((time - F.lit(t0_ns)) / F.lit(NS), 6)


def _rows(frame: DataFrame, order: list[str]) -> list[dict[str, Any]]:
    """The frame's rows sorted by `order` as Spark sorts (nulls first), on the driver: the
    rows are few, and a Spark sort would add a sampling job for its range partitions."""
    rows = [r.asDict() for r in frame.collect()]
    return sorted(rows, key=lambda r: [(r[c] is not None, r[c]) for c in order])


def compute_series(
    events: DataFrame,
    anomalies: DataFrame,
    t0_ns: int,
    t1_ns: int,
    lag_series: DataFrame | None,
) -> dict[str, Any]:
    """Every series of series.json (without its `schema`) from the history's events,
    its anomaly rows and the staleness checker's lag series (None when missing)."""
    bucket_s = bucket_seconds(t0_ns, t1_ns)
    ms = F.lit(1_000_000.0)

    ops = events.filter(F.col("type") == EventType.OP).select(
        "op_id", "f", "phase", "time", _bucket(F.col("time"), t0_ns, bucket_s).alias("t")
    )
    done = ops.filter(F.col("phase").isin(_COMPLETIONS))
    op_counts = done.groupBy("t", "f").agg(
        *[F.count(F.when(F.col("phase") == p, 1)).alias(p) for p in _COMPLETIONS]
    )
    # One row per operation: its invocation and its completion, paired by op_id.
    per_op = (
        ops.filter(F.col("op_id").isNotNull())
        .groupBy("op_id")
        .agg(
            F.min(F.when(F.col("phase") == OpPhase.INVOKE, F.col("time"))).alias("start"),
            F.max(F.when(F.col("phase").isin(_COMPLETIONS), F.col("time"))).alias("end"),
            F.first("f", ignorenulls=True).alias("f"),
        )
        .filter(F.col("start").isNotNull() & F.col("end").isNotNull())
        .select(
            _bucket(F.col("end"), t0_ns, bucket_s).alias("t"),
            "f",
            ((F.col("end") - F.col("start")) / ms).alias("ms"),
        )
    )
    latency = per_op.groupBy("t", "f").agg(
        F.count(F.lit(1)).alias("count"),
        F.percentile_approx("ms", [0.5, 0.95], 1000).alias("_p"),
        F.max("ms").alias("max_ms"),
    )
    latency = latency.select(
        "t",
        "f",
        "count",
        F.col("_p")[0].alias("p50_ms"),
        F.col("_p")[1].alias("p95_ms"),
        "max_ms",
    )

    faults = (
        events.filter((F.col("type") == EventType.FAULT) & F.col("fault_id").isNotNull())
        .groupBy("fault_id")
        .agg(
            F.first("kind", ignorenulls=True).alias("kind"),
            F.first("target", ignorenulls=True).alias("target"),
            F.min(F.when(F.col("phase") == "start", F.col("time"))).alias("_start"),
            F.max(F.when(F.col("phase") == "stop", F.col("time"))).alias("_stop"),
        )
        .select(
            "fault_id",
            "kind",
            "target",
            _seconds(F.coalesce("_start", "_stop"), t0_ns).alias("start"),
            _seconds(F.col("_stop"), t0_ns).alias("stop"),
        )
    )

    is_deliver = F.col("action") == MsgAction.DELIVER
    is_commit = F.col("action") == MsgAction.COMMIT
    offsets = (
        events.filter(
            (F.col("type") == EventType.MSG)
            & F.col("action").isin(MsgAction.DELIVER, MsgAction.COMMIT)
            & F.col("consumer").isNotNull()
        )
        .groupBy(
            "consumer", "channel", "partition", _bucket(F.col("time"), t0_ns, bucket_s).alias("t")
        )
        .agg(
            F.max(F.when(is_deliver, F.col("offset"))).alias("max_delivered"),
            F.max(F.when(is_commit, F.col("offset"))).alias("max_committed"),
            F.count(F.when(is_deliver & (F.col("attempt") > 1), 1)).alias("redeliveries"),
        )
    )

    marks = events.filter(F.col("type") == EventType.MARK).select(
        "kind", _seconds(F.col("time"), t0_ns).alias("t"), "consumer", "channel"
    )
    anomaly_counts = anomalies.groupBy(
        _bucket(F.col("time"), t0_ns, bucket_s).alias("t"), "kind"
    ).count()

    lag: list[dict[str, Any]] = []
    if lag_series is not None:
        lag = _rows(_lag_buckets(lag_series, bucket_s), ["t", "store"])

    return {
        "t0_ns": t0_ns,
        "t1_ns": t1_ns,
        "bucket_s": bucket_s,
        "ops": _rows(op_counts, ["t", "f"]),
        "latency": _rows(latency, ["t", "f"]),
        "lag": lag,
        "faults": _rows(faults, ["start", "fault_id"]),
        "offsets": _rows(offsets, ["t", "consumer", "channel", "partition"]),
        "anomalies": _rows(anomaly_counts, ["t", "kind"]),
        "marks": _rows(marks, ["t", "kind", "consumer", "channel"]),
    }


def _lag_buckets(lag_series: DataFrame, bucket_s: int) -> DataFrame:
    """staleness.lag_series rows (store, second, count, p50_ms, max_ms) in buckets of
    `bucket_s` seconds: counts add up, maxima stay exact, and a wider bucket's p50 is the
    count-weighted mean of its seconds' medians (an approximation, said in the docs)."""
    t = (F.floor(F.col("second") / bucket_s) * bucket_s).cast("long").alias("t")
    return lag_series.groupBy(t, "store").agg(
        F.sum("count").alias("count"),
        (F.sum(F.col("p50_ms") * F.col("count")) / F.sum("count")).alias("p50_ms"),
        F.max("max_ms").alias("max_ms"),
    )
