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

from harness.history.schema import EventType, MsgAction, OpPhase

MAX_BUCKETS = 1200
NS = 1_000_000_000
_COMPLETIONS = [OpPhase.OK.value, OpPhase.FAIL.value, OpPhase.INFO.value]


def bucket_seconds(t0_ns: int, t1_ns: int) -> int:
    """1 second, widened to a whole number of seconds so a run has <= MAX_BUCKETS."""
    span_s = max(0, t1_ns - t0_ns) / NS
    return max(1, math.ceil(span_s / MAX_BUCKETS))


def bucket_column(time: Column, t0_ns: int, bucket_s: int) -> Column:
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


def history_series(events: DataFrame, t0_ns: int, t1_ns: int) -> dict[str, Any]:
    """The series of series.json that come from the history itself (ops, latency,
    faults, offsets, marks), in one job; the anomalies and lag come from the pass
    (checkers.figures)."""
    bucket_s = bucket_seconds(t0_ns, t1_ns)
    ms = F.lit(1_000_000.0)

    ops = events.filter(F.col("type") == EventType.OP).select(
        "op_id", "f", "phase", "time", bucket_column(F.col("time"), t0_ns, bucket_s).alias("t")
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
            bucket_column(F.col("end"), t0_ns, bucket_s).alias("t"),
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
            "consumer",
            "channel",
            "partition",
            bucket_column(F.col("time"), t0_ns, bucket_s).alias("t"),
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
    frames = {
        "ops": (op_counts, ["t", "f"]),
        "latency": (latency, ["t", "f"]),
        "faults": (faults, ["start", "fault_id"]),
        "offsets": (offsets, ["t", "consumer", "channel", "partition"]),
        "marks": (marks, ["t", "kind", "consumer", "channel"]),
    }
    rows = _collect(frames)
    return {"t0_ns": t0_ns, "t1_ns": t1_ns, "bucket_s": bucket_s, **rows}
