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
import math
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
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
    of every group of samples this partition holds, and of each group's time buckets.

    The samples are ordered by group and bucket, each bucket's then sorted on its own; a
    group's own percentiles are picked from its buckets' by np.partition, in linear
    time. DuckDB's sorted lists per grouping set sorted every sample twice (0.5 CPU-s at
    1.3M samples, this 0.23)."""
    if not samples.num_rows:
        return
    outs = pc.dictionary_encode(samples["out"].combine_chunks())
    names = pc.dictionary_encode(samples["name"].combine_chunks(), null_encoding="encode")
    width = len(names.dictionary)
    group = outs.indices.to_numpy().astype(np.int64) * width + names.indices.to_numpy()
    bucket = samples[BUCKET_COLUMN].combine_chunks().to_numpy()
    # Group and bucket as one number; each run of it is sorted on its own below.
    run = group * (int(bucket.max()) + 1) + bucket
    order = np.argsort(run)
    group, bucket, run = group[order], bucket[order], run[order]
    ms = samples["n"].combine_chunks().to_numpy()[order] / 1e6

    def named(g: int) -> tuple[str, str | None]:
        return outs.dictionary[g // width].as_py(), names.dictionary[g % width].as_py()

    latency = out.history_series.setdefault("latency", [])
    for start, end in pairwise([*_run_starts(run).tolist(), len(ms)]):
        what, name = named(int(group[start]))
        values = np.sort(ms[start:end])
        t = int(bucket[start])
        if what == OP_LATENCY:
            p50, p95 = (
                float(values[_rank(PERCENTILES[k], len(values))]) for k in ("p50_ms", "p95_ms")
            )
            latency.append(
                {
                    "t": t,
                    "f": name,
                    "count": len(values),
                    "p50_ms": p50,
                    "p95_ms": p95,
                    "max_ms": float(values[-1]),
                }
            )
        else:
            out.lag_series.append(
                {
                    "t": t,
                    "store": name,
                    "count": len(values),
                    "p50_ms": float(values[_rank(PERCENTILES["p50_ms"], len(values))]),
                    "max_ms": float(values[-1]),
                }
            )
    for start, end in pairwise([*_run_starts(group).tolist(), len(ms)]):
        what, name = named(int(group[start]))
        if what != LAG:
            continue
        count = end - start
        ranks = [_rank(p, count) for p in PERCENTILES.values()] + [count - 1]
        picked = np.partition(ms[start:end], ranks)[ranks]
        out.lag[name] = {
            "count": count,
            **dict(zip(PERCENTILES, picked[:-1].tolist(), strict=True)),
            "max_ms": float(picked[-1]),
        }


def _run_starts(key: np.ndarray) -> np.ndarray:
    """Where each run of equal values of `key` (sorted, not empty) starts."""
    return np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))


def _rank(p: float, count: int) -> int:
    """The 0-based index of the nearest-rank `p` percentile of `count` sorted samples."""
    return max(math.ceil(p * count), 1) - 1


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
