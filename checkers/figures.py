"""What the keyed pass's rows add up to, in one aggregation job: each checker's counts
per kind or its error, the notes, and for series.json and analysis.json the anomalies
per time bucket, the lag per bucket and the lag per store.

One `groupingSets` query does it: the rows are few once grouped (kinds x buckets,
stores x buckets), so they all come back to the driver together.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.anomaly import ANOMALY_COLUMNS, Anomaly, sample_rank
from checkers.keyed.step import ANOMALY, ERROR, EXAMPLE, LAG, NOTE, UNKNOWN_PLACE, WHERE
from checkers.keyed.timeline import OP_COUNT, OP_LATENCY, SERIES_ROW
from checkers.reference.lost import IN_LOG, NOT_IN_LOG
from checkers.reference.staleness import PERCENTILES
from checkers.series import COMPLETIONS, HISTORY_SERIES, bucket_column, sorted_rows

_COLUMNS = ("out", "checker", "kind", "store", "t")
_BY_KIND = ("out", "checker", "kind", "t")  # anomalies per bucket, notes, errors
_LAG_BY_BUCKET = ("out", "store", "t")
_LAG_BY_STORE = ("out", "store")


def _grouping_id(grouped: tuple[str, ...]) -> int:
    """Spark's grouping_id() of a grouping set: a bit per column of _COLUMNS, set
    where the column is not grouped, the first column the highest bit."""
    return sum(1 << (len(_COLUMNS) - 1 - i) for i, c in enumerate(_COLUMNS) if c not in grouped)


@dataclass
class PassFigures:
    """The pass's rows, added up."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    """checker -> kind -> anomalies"""
    errors: dict[str, str] = field(default_factory=dict)
    """checker -> its error, the trace after the first line"""
    notes: Counter[str] = field(default_factory=Counter)
    anomaly_series: list[dict[str, Any]] = field(default_factory=list)
    lag_series: list[dict[str, Any]] = field(default_factory=list)
    lag: dict[str, dict[str, float | int]] = field(default_factory=dict)
    examples: dict[str, list[Anomaly]] = field(default_factory=dict)
    """kind -> its first `per_kind` anomalies by sample_rank"""
    lost_where: dict[str, dict[str, int]] = field(default_factory=dict)
    """lost kind -> how many of its rows are in the log, not in it, or not known"""
    history_series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The series of the history itself (checkers.series.HISTORY_SERIES), sorted."""


def pass_figures(rows: DataFrame, t0_ns: int, bucket_s: int, per_kind: int = 5) -> PassFigures:
    """Add up the pass's rows (checkers.keyed.step.OUTPUT_DDL) in one job, and pick
    `per_kind` examples of each kind among the partitions' candidates."""
    timed = F.col("out").isin(ANOMALY, LAG, OP_COUNT, OP_LATENCY)
    frame = rows.select(
        *ANOMALY_COLUMNS,
        "out",
        F.when(timed, bucket_column(F.col("time"), t0_ns, bucket_s)).alias("t"),
        "n",
    )
    ms = F.col("n") / F.lit(1e6)
    qs = F.percentile_approx(ms, list(PERCENTILES.values()))
    latency = F.percentile_approx(F.when(F.col("out") == OP_LATENCY, ms), [0.5, 0.95])
    found = (
        frame.groupingSets([list(_BY_KIND), list(_LAG_BY_BUCKET), list(_LAG_BY_STORE)], *_COLUMNS)
        .agg(
            F.grouping_id().alias("gid"),
            F.count(F.lit(1)).alias("rows"),
            F.sum("n").alias("n"),
            F.first("detail").alias("detail"),
            qs.alias("qs"),
            latency.alias("latency"),
            F.max(ms).alias("max_ms"),
            F.collect_list(F.when(F.col("out") == SERIES_ROW, F.col("detail"))).alias("details"),
            F.collect_list(F.when(F.col("out") == EXAMPLE, F.struct(*ANOMALY_COLUMNS))).alias(
                "examples"
            ),
        )
        .collect()
    )
    by_kind, lag_bucket, lag_store = (
        _grouping_id(g) for g in (_BY_KIND, _LAG_BY_BUCKET, _LAG_BY_STORE)
    )
    out = PassFigures()
    per_bucket: Counter[tuple[int, str, str]] = Counter()
    ops: dict[tuple[int, str], dict[str, Any]] = {}
    history = {name: [] for name in HISTORY_SERIES}
    for r in found:
        gid, what = r["gid"], r["out"]
        if gid == by_kind and what == OP_COUNT:
            row = ops.setdefault((r["t"], r["kind"]), _op_row(r["t"], r["kind"]))
            row[r["checker"]] += int(r["n"])
        elif gid == by_kind and what == OP_LATENCY:
            p50, p95 = r["latency"]
            history["latency"].append(
                {
                    "t": r["t"],
                    "f": r["kind"],
                    "count": r["rows"],
                    "p50_ms": p50,
                    "p95_ms": p95,
                    "max_ms": r["max_ms"],
                }
            )
        elif gid == by_kind and what == WHERE:
            places = {IN_LOG: 0, NOT_IN_LOG: 0, UNKNOWN_PLACE: 0}
            out.lost_where.setdefault(r["kind"], places)[r["checker"]] += int(r["n"])
        elif gid == by_kind and what == SERIES_ROW:
            history[r["kind"]] += [json.loads(x) for x in r["details"]]
        elif gid == by_kind and what == ANOMALY:
            per_bucket[(r["t"], r["checker"], r["kind"])] += r["rows"]
        elif gid == by_kind and what == NOTE:
            out.notes[r["kind"]] += int(r["n"])
        elif gid == by_kind and what == ERROR:
            out.errors[r["checker"]] = r["detail"]
        elif gid == by_kind and what == EXAMPLE:
            found = [Anomaly(*(x[c] for c in ANOMALY_COLUMNS)) for x in r["examples"]]
            out.examples[r["kind"]] = sorted(found, key=sample_rank)[:per_kind]
        elif gid == lag_bucket and what == LAG:
            out.lag_series.append(
                {
                    "t": r["t"],
                    "store": r["store"],
                    "count": r["rows"],
                    "p50_ms": r["qs"][0],
                    "max_ms": r["max_ms"],
                }
            )
        elif gid == lag_store and what == LAG:
            out.lag[r["store"]] = {
                "count": r["rows"],
                **dict(zip(PERCENTILES, r["qs"], strict=True)),
                "max_ms": r["max_ms"],
            }
    # A checker that failed on some group counts nothing: its other groups' rows are
    # a part whose size says nothing.
    series: Counter[tuple[int, str]] = Counter()
    for (t, checker, kind), n in per_bucket.items():
        if checker not in out.errors:
            out.counts.setdefault(checker, Counter())[kind] += n
            series[(t, kind)] += n
    out.anomaly_series = [
        {"t": t, "kind": kind, "count": n} for (t, kind), n in sorted(series.items())
    ]
    history["ops"] = list(ops.values())
    out.history_series = {
        name: sorted_rows(history[name], order) for name, order in HISTORY_SERIES.items()
    }
    out.lag_series.sort(key=lambda r: (r["t"], r["store"]))
    out.lag = dict(sorted(out.lag.items()))
    out.examples = {
        kind: found
        for kind, found in out.examples.items()
        if found and found[0].checker not in out.errors
    }
    return out


def _op_row(t: int, f: str | None) -> dict[str, Any]:
    """A row of the ops series with no completion counted yet."""
    return {"t": t, "f": f, **{phase: 0 for phase in COMPLETIONS}}
