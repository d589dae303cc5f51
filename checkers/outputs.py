"""anomalies.parquet and examples.json, written from Spark (docs/analysis.md)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.anomaly import ALL_KINDS, ANOMALY_COLUMNS, KINDS

ANOMALY_ORDER = ["time", "kind", "store", "key", "consumer"]
CHECKER_OF = {kind: checker for checker, kinds in KINDS.items() for kind in kinds}


def anomaly_arrow_schema() -> pa.Schema:
    """The Arrow schema of anomalies.parquet (checkers.anomaly.SPARK_DDL)."""
    return pa.schema(
        [
            pa.field(c, pa.int64() if c == "time" else pa.string(), c not in ("checker", "kind"))
            for c in ANOMALY_COLUMNS
        ]
    )


def write_single_parquet(frame: DataFrame, dest: Path, scratch: Path) -> None:
    """Write `frame` as one Parquet file at `dest` (Spark writes directories: one
    partition is written under `scratch` and its part file moved)."""
    out = scratch / f"{dest.stem}.spark"
    frame.coalesce(1).write.mode("overwrite").parquet(str(out))
    parts = sorted(out.glob("part-*.parquet"))
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    if parts:
        shutil.move(parts[0], tmp)
    else:  # Spark may write no file for an empty frame
        pq.write_table(anomaly_arrow_schema().empty_table(), tmp)
    os.replace(tmp, dest)
    shutil.rmtree(out, ignore_errors=True)


def examples(anomalies: DataFrame, per_kind: int, t0_ns: int) -> dict[str, Any]:
    """examples.json's `kinds`: per kind its count and up to `per_kind` rows, chosen in
    Spark by a deterministic hash so that they spread over the run."""
    ranked = Window.partitionBy("kind").orderBy(
        F.xxhash64("time", "store", "key", "consumer"), *ANOMALY_ORDER
    )
    sampled = (
        anomalies.withColumn("_n", F.count(F.lit(1)).over(Window.partitionBy("kind")))
        .withColumn("_rank", F.row_number().over(ranked))
        .filter(F.col("_rank") <= per_kind)
        .collect()
    )
    out: dict[str, Any] = {
        kind: {"checker": CHECKER_OF[kind], "count": 0, "examples": []} for kind in ALL_KINDS
    }
    for row in sorted(sampled, key=lambda r: (r["kind"], r["time"])):
        entry = out.setdefault(row["kind"], {"checker": row["checker"], "examples": []})
        entry["count"] = row["_n"]
        entry["examples"].append(
            {
                "store": row["store"],
                "key": row["key"],
                "consumer": row["consumer"],
                "time_ns": row["time"],
                "t": round((row["time"] - t0_ns) / 1e9, 6) if row["time"] is not None else None,
                "detail": row["detail"],
                "evidence": _parse_evidence(row["evidence"]),
            }
        )
    return out


def _parse_evidence(text: str | None) -> list[Any]:
    """The evidence column as a JSON array; a malformed one is kept as text."""
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return [{"unparsed": text}]
    return value if isinstance(value, list) else [value]
