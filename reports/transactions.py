"""The transactions behind a view's states, for the report's evidence (issue 37).

A view state is a step of a transaction (docs/history.md): its invocation's `extra`
names the transaction's op_id (`txn`), whose `extra` names its template (`name`). An
anomaly's evidence holds the states' completions; their invocations and transactions
are read from history.parquet by op_id (a filtered scan: only those rows are kept).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from driftlab.harness.history.schema import SOURCE_STORE, STEP

VIEW_STATE = "view-state"
_COLUMNS = ["op_id", "f", "phase", "extra"]
_BATCH_ROWS = 1 << 16


def _extra(row: dict[str, Any]) -> dict[str, Any]:
    try:
        found = json.loads(row.get("extra") or "{}")
    except json.JSONDecodeError:
        return {}
    return found if isinstance(found, dict) else {}


def is_view_state(e: dict[str, Any]) -> bool:
    """Whether an evidence event may be a view's state: an op on the source's key of a
    view (`S/<entity>`)."""
    return (
        e.get("type") == "op"
        and e.get("store") == SOURCE_STORE
        and "/" in str(e.get("key") or "")
        and e.get("op_id") is not None
    )


def _scan(history: Path, op_ids: set[str]) -> list[dict[str, Any]]:
    """The rows (op_id, f, phase, extra) of `op_ids` in history.parquet."""
    if not op_ids or not history.exists():
        return []
    wanted = pa.array(sorted(op_ids), pa.string())
    parquet = pq.ParquetFile(history)
    rows: list[dict[str, Any]] = []
    for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=_COLUMNS):
        rows += batch.filter(pc.is_in(batch.column("op_id"), value_set=wanted)).to_pylist()
    return rows


def transactions(history: Path, evidence: Iterable[dict[str, Any]]) -> dict[str, str]:
    """op_id of each view state in `evidence` -> its transaction, as `name (op_id)`."""
    states = {e["op_id"]: _extra(e).get("txn") for e in evidence if is_view_state(e)}
    if not states:
        return {}
    unknown = {op for op, txn in states.items() if txn is None}
    for row in _scan(history, unknown):
        extra = _extra(row)
        if extra.get(STEP) == VIEW_STATE and extra.get("txn"):
            states[row["op_id"]] = str(extra["txn"])
    txns = {txn for txn in states.values() if txn}
    names = {
        row["op_id"]: str(_extra(row).get("name") or "?")
        for row in _scan(history, txns)
        if row["f"] == "txn" and row["phase"] == "invoke"
    }
    return {op: f"{names.get(txn, '?')} ({txn})" for op, txn in states.items() if txn is not None}
