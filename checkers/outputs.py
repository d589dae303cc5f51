"""What anomalies.parquet and examples.json hold (docs/analysis.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from driftlab.checkers.anomaly import ALL_KINDS, ANOMALY_COLUMNS, KINDS, Anomaly

if TYPE_CHECKING:
    from driftlab.checkers.analysis_files import KindExamples

ANOMALY_ORDER = ["time", "kind", "store", "key", "consumer"]
EXAMPLES_PER_KIND = 5
"""The anomalies of each kind examples.json shows, by default."""
CHECKER_OF = {kind: checker for checker, kinds in KINDS.items() for kind in kinds}


def anomaly_arrow_schema() -> pa.Schema:
    """The Arrow schema of anomalies.parquet (driftlab.checkers.anomaly.SPARK_DDL)."""
    return pa.schema(
        [
            pa.field(c, pa.int64() if c == "time" else pa.string(), c not in ("checker", "kind"))
            for c in ANOMALY_COLUMNS
        ]
    )


def examples(
    chosen: dict[str, list[Anomaly]], counts: dict[str, int], t0_ns: int
) -> dict[str, KindExamples]:
    """examples.json's `kinds`: per kind its count and its sampled rows (chosen in the
    keyed pass by driftlab.checkers.anomaly.sample_rank, so that they spread over the run), in
    time order."""
    found = {kind: sorted(rows, key=lambda a: a.time) for kind, rows in sorted(chosen.items())}
    out = {kind: _kind_examples(CHECKER_OF[kind], kind, found, counts, t0_ns) for kind in ALL_KINDS}
    for kind, rows in found.items():
        if kind not in out:
            out[kind] = _kind_examples(rows[0].checker, kind, found, counts, t0_ns)
    return out


def _kind_examples(
    checker: str, kind: str, found: dict[str, list[Anomaly]], counts: dict[str, int], t0_ns: int
) -> KindExamples:
    # Here, not at the top: the keyed pass's workers import this module (for the
    # anomalies' schema) and need no model of the files only the driver writes.
    from driftlab.checkers.analysis_files import Example, KindExamples

    return KindExamples(
        checker=checker,
        count=counts.get(kind, 0),
        examples=[
            Example(
                store=a.store,
                key=a.key,
                consumer=a.consumer,
                time_ns=a.time,
                t=round((a.time - t0_ns) / 1e9, 6) if a.time is not None else None,
                detail=a.detail,
                evidence=_parse_evidence(a.evidence),
            )
            for a in found.get(kind, [])
        ],
    )


def _parse_evidence(text: str | None) -> list[Any]:
    """The evidence column as a JSON array; a malformed one is kept as text."""
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return [{"unparsed": text}]
    return value if isinstance(value, list) else [value]
