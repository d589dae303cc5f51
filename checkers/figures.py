"""What the keyed pass's rows add up to: each checker's counts per kind or its error,
the notes, the examples, where lost messages were, the series of series.json, the lag
of analysis.json, and the run's sorted anomalies.

The pass's last stage does it (driftlab.checkers.keyed.spark), in the same Spark job as the
checks. Each reduce partition buckets its rows by time (`with_buckets`) and splits them
(`summary_parts`): the samples whose percentiles are wanted (LAG per store, OP_LATENCY
per operation) go to a summary partition chosen by store or operation, so that each
summary partition holds every sample of its stores and operations and computes exact
nearest-rank percentiles (as driftlab.checkers.reference.staleness.lag does); every other row
goes to summary partition 0, which adds up the counts and writes anomalies.parquet.
Each summary partition returns a small PassFigures; the driver merges them (`merged`).
Nothing that grows with the history reaches the driver.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from driftlab.checkers.anomaly import ANOMALY_COLUMNS, Anomaly, sample_rank
from driftlab.checkers.keyed.duck import cursor
from driftlab.checkers.keyed.step import (
    ANOMALY,
    CHANCE,
    ERROR,
    EXAMPLE,
    LAG,
    NOTE,
    UNKNOWN_PLACE,
    WHERE,
    output_schema,
)
from driftlab.checkers.keyed.timeline import OP_COUNT, OP_LATENCY, SERIES_ROW
from driftlab.checkers.outputs import ANOMALY_ORDER, anomaly_arrow_schema
from driftlab.checkers.reference.lost import IN_LOG, NOT_IN_LOG
from driftlab.checkers.reference.staleness import PERCENTILES
from driftlab.checkers.series import COMPLETIONS, HISTORY_SERIES, NS, sorted_rows

BUCKET_COLUMN = "t"
_SAMPLES = (LAG, OP_LATENCY)
_TIMED = (ANOMALY, LAG, OP_COUNT, OP_LATENCY)


@dataclass
class PassFigures:
    """The pass's rows, added up (a summary partition's part of them, until merged)."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    """checker -> kind -> anomalies"""
    errors: dict[str, str] = field(default_factory=dict)
    """checker -> its error, the trace after the first line"""
    notes: Counter[str] = field(default_factory=Counter)
    chances: Counter[str] = field(default_factory=Counter)
    """kind -> its chances in the history (driftlab.checkers.coverage)"""
    anomaly_series: list[dict[str, Any]] = field(default_factory=list)
    lag_series: list[dict[str, Any]] = field(default_factory=list)
    lag: dict[str, dict[str, float | int]] = field(default_factory=dict)
    examples: dict[str, list[Anomaly]] = field(default_factory=dict)
    """kind -> its first `per_kind` anomalies by sample_rank"""
    lost_where: dict[str, dict[str, int]] = field(default_factory=dict)
    """lost kind -> how many of its rows are in the log, not in it, or not known"""
    history_series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The series of the history itself (driftlab.checkers.series.HISTORY_SERIES), sorted."""


def with_buckets(rows: pa.Table, t0_ns: int, bucket_s: int) -> pa.Table:
    """`rows` (pass rows, driftlab.checkers.keyed.step.OUTPUT_DDL) with the start of each timed
    row's time bucket in seconds since `t0_ns` (null for untimed rows)."""
    with cursor() as con:
        con.register("rows", rows)
        return con.sql(
            f"""SELECT *, CASE WHEN "out" IN ({_quoted(_TIMED)})
              THEN CAST(floor(("time" - {t0_ns}) / {bucket_s * NS}) * {bucket_s} AS BIGINT)
              END AS {BUCKET_COLUMN} FROM rows"""
        ).to_arrow_table()


def summary_parts(rows: pa.Table, parts: int) -> Iterator[tuple[int, pa.Table]]:
    """`rows` (with_buckets) cut for the summary partitions: the samples of one store or
    operation all to one partition, chosen by a stable hash of its name; every other
    row to partition 0."""
    samples = pc.is_in(rows["out"], pa.array(_SAMPLES))
    rest = rows.filter(pc.invert(samples))
    if rest.num_rows:
        yield 0, rest
    picked = rows.filter(samples)
    if not picked.num_rows:
        return
    name = pc.if_else(pc.equal(picked["out"], LAG), picked["store"], picked["kind"])
    narrow = pa.table(
        {"out": picked["out"], "name": name, BUCKET_COLUMN: picked[BUCKET_COLUMN], "n": picked["n"]}
    )
    keys = pc.binary_join_element_wise(narrow["out"], pc.fill_null(narrow["name"], ""), "\x00")
    distinct = pc.unique(keys)
    chosen = pc.take(_targets(distinct, parts), pc.index_in(keys, distinct))
    for part in pc.unique(chosen).to_pylist():
        yield part, narrow.filter(pc.equal(chosen, part))


def _targets(keys: pa.Array, parts: int) -> pa.Array:
    """The summary partition of each distinct (out, name) key."""
    return pa.array([zlib.crc32(k.encode()) % parts for k in keys.to_pylist()], pa.int32())


def summarize(tables: list[pa.Table], per_kind: int, anomalies_path: str | None) -> PassFigures:
    """A summary partition's part of the figures, from the rows `summary_parts` sent
    it; partition 0 (`anomalies_path` given) also writes the sorted anomalies of the
    checkers that did not fail there."""
    out = PassFigures()
    small = [t for t in tables if "detail" in t.column_names]
    samples = [t for t in tables if "detail" not in t.column_names]
    if samples:
        _percentiles(pa.concat_tables(samples), out)
    if anomalies_path is not None:
        rows = pa.concat_tables(small) if small else _empty_rows()
        _add_up(rows, per_kind, out)
        found = rows.filter(pc.equal(rows["out"], ANOMALY))
        if out.errors:
            found = found.filter(pc.invert(pc.is_in(found["checker"], pa.array(list(out.errors)))))
        found = found.select(list(ANOMALY_COLUMNS))
        order = pc.sort_indices(found, [(c, "ascending", "at_start") for c in ANOMALY_ORDER])
        pq.write_table(found.take(order).cast(anomaly_arrow_schema()), anomalies_path)
    return out


def merged(parts: list[PassFigures]) -> PassFigures:
    """The figures of the whole pass from its summary partitions' parts."""
    out = PassFigures()
    history: dict[str, list[dict[str, Any]]] = {name: [] for name in HISTORY_SERIES}
    for part in parts:
        out.counts.update(part.counts)
        out.errors.update(part.errors)
        out.notes.update(part.notes)
        out.chances.update(part.chances)
        out.anomaly_series += part.anomaly_series
        out.lag_series += part.lag_series
        out.lag.update(part.lag)
        out.examples.update(part.examples)
        out.lost_where.update(part.lost_where)
        for name, found in part.history_series.items():
            history[name] += found
    out.history_series = {
        name: sorted_rows(history[name], order) for name, order in HISTORY_SERIES.items()
    }
    out.anomaly_series.sort(key=lambda r: (r["t"], r["kind"]))
    out.lag_series.sort(key=lambda r: (r["t"], r["store"]))
    out.lag = dict(sorted(out.lag.items()))
    return out


def _percentiles(samples: pa.Table, out: PassFigures) -> None:
    """Exact nearest-rank percentiles (an observed value, the reference's definition)
    of every group of samples this partition holds."""
    with cursor() as con:
        con.register("samples", samples)
        picks = ", ".join(
            f"ms[greatest(ceil({p}::DOUBLE * count), 1)::BIGINT]" for p in PERCENTILES.values()
        )
        found = con.sql(
            f"""SELECT "out", name, {BUCKET_COLUMN}, whole, count, {picks}, ms[count]
            FROM (SELECT "out", name, {BUCKET_COLUMN}, grouping({BUCKET_COLUMN}) AS whole,
                    count(*) AS count, list_sort(list(n / 1e6)) AS ms
                  FROM samples
                  GROUP BY GROUPING SETS (("out", name, {BUCKET_COLUMN}), ("out", name)))"""
        ).fetchall()
    latency = out.history_series.setdefault("latency", [])
    for what, name, t, whole, count, p50, p95, p99, max_ms in found:
        if what == OP_LATENCY and not whole:
            latency.append(
                {"t": t, "f": name, "count": count, "p50_ms": p50, "p95_ms": p95, "max_ms": max_ms}
            )
        elif what == LAG and not whole:
            out.lag_series.append(
                {"t": t, "store": name, "count": count, "p50_ms": p50, "max_ms": max_ms}
            )
        elif what == LAG:
            out.lag[name] = {
                "count": count,
                **dict(zip(PERCENTILES, (p50, p95, p99), strict=True)),
                "max_ms": max_ms,
            }


def _add_up(rows: pa.Table, per_kind: int, out: PassFigures) -> None:
    """Everything but the percentiles, from partition 0's rows."""
    for r in rows.filter(pc.equal(rows["out"], ERROR)).to_pylist():
        out.errors.setdefault(r["checker"], r["detail"])
    with cursor() as con:
        con.register("rows", rows)
        grouped = con.sql(
            f"""SELECT "out", checker, kind, {BUCKET_COLUMN}, count(*) AS rows, sum(n) AS n
            FROM rows WHERE "out" IN ({_quoted((ANOMALY, NOTE, CHANCE, WHERE, OP_COUNT))})
            GROUP BY ALL"""
        ).fetchall()
        details = con.sql(
            f"""SELECT kind, detail FROM rows WHERE "out" = '{SERIES_ROW}'"""
        ).fetchall()
    series: Counter[tuple[int, str]] = Counter()
    ops: dict[tuple[int, str], dict[str, Any]] = {}
    for what, checker, kind, t, count, n in grouped:
        if what == ANOMALY and checker not in out.errors:
            # A checker that failed on some group counts nothing: its other groups'
            # rows are a part whose size says nothing.
            out.counts.setdefault(checker, Counter())[kind] += count
            series[(t, kind)] += count
        elif what == NOTE:
            out.notes[kind] += int(n)
        elif what == CHANCE:
            out.chances[kind] += int(n)
        elif what == WHERE:
            places = {IN_LOG: 0, NOT_IN_LOG: 0, UNKNOWN_PLACE: 0}
            out.lost_where.setdefault(kind, places)[checker] += int(n)
        elif what == OP_COUNT:
            row = ops.setdefault((t, kind), {"t": t, "f": kind, **{p: 0 for p in COMPLETIONS}})
            row[checker] += int(n)
    out.anomaly_series = [{"t": t, "kind": k, "count": n} for (t, k), n in series.items()]
    out.history_series["ops"] = list(ops.values())
    for kind, detail in details:
        out.history_series.setdefault(kind, []).append(json.loads(detail))
    candidates: dict[str, list[Anomaly]] = {}
    for r in rows.filter(pc.equal(rows["out"], EXAMPLE)).to_pylist():
        if r["checker"] not in out.errors:
            a = Anomaly(*(r[c] for c in ANOMALY_COLUMNS))
            candidates.setdefault(a.kind, []).append(a)
    out.examples = {
        kind: sorted(found, key=sample_rank)[:per_kind] for kind, found in candidates.items()
    }


def _empty_rows() -> pa.Table:
    return output_schema().append(pa.field(BUCKET_COLUMN, pa.int64())).empty_table()


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)
