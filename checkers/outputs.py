"""anomalies.parquet and examples.json, written from Spark (docs/analysis.md)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from checkers.anomaly import ALL_KINDS, ANOMALY_COLUMNS, KINDS, Anomaly

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
    """Write `frame`, of one partition, as one Parquet file at `dest` (Spark writes
    directories: it is written under `scratch` and its part file moved)."""
    out = scratch / f"{dest.stem}.spark"
    frame.write.mode("overwrite").parquet(str(out))
    parts = sorted(out.glob("part-*.parquet"))
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    if parts:
        shutil.move(parts[0], tmp)
    else:  # Spark may write no file for an empty frame
        pq.write_table(anomaly_arrow_schema().empty_table(), tmp)
    os.replace(tmp, dest)
    shutil.rmtree(out, ignore_errors=True)


def examples(
    chosen: dict[str, list[Anomaly]], counts: dict[str, int], t0_ns: int
) -> dict[str, Any]:
    """examples.json's `kinds`: per kind its count and its sampled rows (chosen in the
    keyed pass by checkers.anomaly.sample_rank, so that they spread over the run), in
    time order."""
    out: dict[str, Any] = {
        kind: {"checker": CHECKER_OF[kind], "count": counts.get(kind, 0), "examples": []}
        for kind in ALL_KINDS
    }
    for kind, found in sorted(chosen.items()):
        entry = out.setdefault(
            kind, {"checker": found[0].checker, "count": counts.get(kind, 0), "examples": []}
        )
        for a in sorted(found, key=lambda a: a.time):
            entry["examples"].append(
                {
                    "store": a.store,
                    "key": a.key,
                    "consumer": a.consumer,
                    "time_ns": a.time,
                    "t": round((a.time - t0_ns) / 1e9, 6) if a.time is not None else None,
                    "detail": a.detail,
                    "evidence": _parse_evidence(a.evidence),
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
