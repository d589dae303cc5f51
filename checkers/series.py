"""series.json and the lag figures: per-time-bucket aggregates for the report.

Only aggregates reach the driver (at most MAX_BUCKETS buckets per series and group), so
the file stays small whatever the history's size, and every series comes back in one
Spark job. Format: docs/analysis.md.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.reference.staleness import PERCENTILES
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


def _collect(frames: dict[str, tuple[DataFrame, list[str]]]) -> dict[str, list[dict[str, Any]]]:
    """Every frame's rows in one job (a union of their rows as JSON), each sorted by its
    order as Spark sorts (nulls first), on the driver: the rows are few, and a Spark
    sort would add a sampling job for its range partitions."""
    parts = [
        frame.select(F.lit(name).alias("s"), F.to_json(F.struct(*frame.columns)).alias("j"))
        for name, (frame, _) in frames.items()
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionAll(part)
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in frames}
    for row in union.collect():
        found[row["s"]].append(json.loads(row["j"]))
    out = {}
    for name, (frame, order) in frames.items():
        # to_json leaves out null fields: every column is back, null where absent.
        rows = [{c: r.get(c) for c in frame.columns} for r in found[name]]
        out[name] = sorted(rows, key=lambda r: [(r[c] is not None, r[c]) for c in order])
    return out


def compute_series(
    events: DataFrame,
    anomalies: DataFrame,
    t0_ns: int,
    t1_ns: int,
    lags: DataFrame | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every series of series.json (without its `schema`) and the lag figures of
    analysis.json, from the history's events, its anomaly rows and the lag samples
    (store, time: the write's ok, n: the lag in ns; None when the staleness checker
    failed)."""
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

    frames = {
        "ops": (op_counts, ["t", "f"]),
        "latency": (latency, ["t", "f"]),
        "faults": (faults, ["start", "fault_id"]),
        "offsets": (offsets, ["t", "consumer", "channel", "partition"]),
        "anomalies": (anomaly_counts, ["t", "kind"]),
        "marks": (marks, ["t", "kind", "consumer", "channel"]),
    }
    if lags is not None:
        lag_ms = (F.col("n") / ms).alias("lag_ms")
        samples = lags.select("store", "time", lag_ms)
        frames["lag"] = (_lag_buckets(samples, t0_ns, bucket_s), ["t", "store"])
        frames["lag_stats"] = (_lag_stats(samples), ["store"])
    rows = _collect(frames)
    stats = {
        r["store"]: {
            "count": r["count"],
            **{name: r[f"q{i}"] for i, name in enumerate(PERCENTILES)},
            "max_ms": r["max_ms"],
        }
        for r in rows.pop("lag_stats", [])
    }
    series = {
        "t0_ns": t0_ns,
        "t1_ns": t1_ns,
        "bucket_s": bucket_s,
        "ops": rows["ops"],
        "latency": rows["latency"],
        "lag": rows.get("lag", []),
        "faults": rows["faults"],
        "offsets": rows["offsets"],
        "anomalies": rows["anomalies"],
        "marks": rows["marks"],
    }
    return series, stats


def _lag_buckets(samples: DataFrame, t0_ns: int, bucket_s: int) -> DataFrame:
    """(t, store, count, p50_ms, max_ms) of the lag samples by the write's `ok` time in
    buckets of `bucket_s` seconds since the first event (percentile_approx)."""
    return samples.groupBy(_bucket(F.col("time"), t0_ns, bucket_s).alias("t"), "store").agg(
        F.count(F.lit(1)).alias("count"),
        F.percentile_approx("lag_ms", 0.5).alias("p50_ms"),
        F.max("lag_ms").alias("max_ms"),
    )


def _lag_stats(samples: DataFrame) -> DataFrame:
    """(store, count, q0.., max_ms): checkers.reference.staleness.lag per store, with
    Spark's percentile_approx (nearest-rank, an observed value)."""
    qs = F.percentile_approx("lag_ms", list(PERCENTILES.values()))
    return samples.groupBy("store").agg(
        F.count(F.lit(1)).alias("count"),
        *[qs[i].alias(f"q{i}") for i in range(len(PERCENTILES))],
        F.max("lag_ms").alias("max_ms"),
    )
