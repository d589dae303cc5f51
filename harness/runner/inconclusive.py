"""When a verdict proves nothing: the workload never ran, or a scheduled fault never
took effect. Such a run is `inconclusive` (exit 3, the lab failed to test the claim),
not "not reproduced" and never "reproduced"; a forbidden anomaly it found stays one.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers.verdict import UNEXPECTED
from harness.history.schema import EventType, FaultPhase
from harness.rundir import RunDir, write_json_atomically

INCONCLUSIVE = "inconclusive"


def reasons(run_dir: RunDir) -> list[str]:
    """Why the analysed run at `run_dir` cannot support its verdict (empty: it can).

    Reads config.json's fault schedule and the `type`, `phase` and `error` columns of
    history.parquet (written by the analysis).
    """
    table = pq.read_table(run_dir.parquet, columns=["type", "phase", "error"])
    types = table.column("type")
    out = []
    if not pc.any(pc.equal(types, EventType.OP.value)).as_py():
        out.append("the workload never ran: the history holds no client operation")
    config = json.loads(run_dir.config.read_text())
    scheduled = len(config.get("params", {}).get("faults", []))
    if scheduled:
        faults = table.filter(pc.equal(types, EventType.FAULT.value))
        starts = pc.sum(pc.equal(faults.column("phase"), FaultPhase.START.value)).as_py() or 0
        failed = sum(
            1 for e in faults.column("error").to_pylist() if (e or "").startswith("not injected")
        )
        effective = starts - failed
        if effective < scheduled:
            out.append(
                f"{scheduled - effective} of {scheduled} scheduled fault(s) never took effect "
                "(not reached or not injected; see the fault events and logs/runner.log)"
            )
    return out


def apply(run_dir: RunDir, analysis: dict[str, Any]) -> list[str]:
    """Mark the analysis inconclusive when `reasons` finds any, in analysis.json too
    (the report reads it); returns the reasons. A forbidden anomaly is kept."""
    why = reasons(run_dir)
    if not why or analysis.get("verdict") == UNEXPECTED:
        return []
    analysis["verdict"] = INCONCLUSIVE
    analysis["inconclusive"] = why
    write_json_atomically(run_dir.analysis, analysis)
    return why
