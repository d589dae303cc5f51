"""When a verdict proves nothing: the workload never ran, the pipeline under test never
delivered, applied or read anything, or a scheduled fault never took effect. Such a run
is `inconclusive` (exit 3, the lab failed to test the claim), not "not reproduced" and
never "reproduced": a claim checked against nothing is not a pass (Jepsen calls it an
empty transaction graph). A forbidden anomaly it found stays one, except a loss found
where nothing downstream observed anything: every message and write is "lost" then,
because nobody read, which says nothing of the pipeline.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers.reference.common import WRITE_FS
from checkers.verdict import UNEXPECTED
from harness.history.schema import LOG_AUDIT, SOURCE_STORE, EventType, FaultPhase, MsgAction
from harness.rundir import RunDir, write_json_atomically

INCONCLUSIVE = "inconclusive"

COLUMNS = (
    "type",
    "time",
    "action",
    "f",
    "phase",
    "store",
    "consumer",
    "channel",
    "kind",
    "target",
    "fault_id",
    "error",
)
"""The history columns `reasons` reads."""

_NOT_INJECTED = "not injected"

VACUOUS_UNOBSERVED = frozenset({"lost-message", "lost-write"})
"""Kinds that a run whose downstream observed nothing finds for every message or write."""


@dataclass(frozen=True)
class Missing:
    """What a history lacks for its verdict to count, one line each."""

    ran: list[str] = field(default_factory=list)
    """the workload never ran"""
    unobserved: list[str] = field(default_factory=list)
    """writes whose downstream observed nothing"""
    faults: list[str] = field(default_factory=list)
    """scheduled faults that never took effect"""

    @property
    def lines(self) -> list[str]:
        """Every line, in that order."""
        return [*self.ran, *self.unobserved, *self.faults]


def reasons(run_dir: RunDir) -> Missing:
    """Why the analysed run at `run_dir` cannot support its verdict (nothing: it can).

    Reads config.json's fault schedule and a few columns of history.parquet (written by
    the analysis).
    """
    config = json.loads(run_dir.config.read_text())
    scheduled = config.get("params", {}).get("faults", [])
    return reasons_of(pq.read_table(run_dir.parquet, columns=list(COLUMNS)), scheduled)


def reasons_of(history: pa.Table, scheduled: Sequence[dict[str, Any]]) -> Missing:
    """What is missing from `history` (a table with COLUMNS) for its verdict to count;
    `scheduled` are config.json's fault windows."""
    types = history.column("type")
    ran = []
    if not pc.any(pc.equal(types, EventType.OP.value)).as_py():
        ran.append("the workload never ran: the history holds no client operation")
    return Missing(ran, _unobserved(history), _missing_faults(history, scheduled))


def _count(table: pa.Table, mask: pa.ChunkedArray) -> int:
    return table.filter(pc.fill_null(mask, False)).num_rows


def _unobserved(h: pa.Table) -> list[str]:
    """Writes whose downstream observed nothing: messages produced but never delivered
    or applied, source writes no derived store applied, skipped, delivered or read."""
    msgs = h.filter(pc.equal(h.column("type"), EventType.MSG.value))
    ops = h.filter(pc.equal(h.column("type"), EventType.OP.value))
    action = msgs.column("action")
    # The log audit reads the broker's log back after quiescence: it is no consumer, so
    # its reads are not the pipeline observing anything.
    by_consumer = pc.not_equal(pc.fill_null(msgs.column("consumer"), ""), LOG_AUDIT)
    observed = pc.and_(
        pc.is_in(action, pa.array([MsgAction.DELIVER.value, MsgAction.APPLY.value])),
        by_consumer,
    )
    derived_store = pc.and_(
        pc.is_valid(ops.column("store")), pc.not_equal(ops.column("store"), SOURCE_STORE)
    )
    ok_derived = pc.and_(derived_store, pc.equal(ops.column("phase"), "ok"))
    derived_ops = _count(
        ops, pc.and_(ok_derived, pc.is_in(ops.column("f"), pa.array(["read", *WRITE_FS])))
    )
    delivered = _count(msgs, observed)
    skipped = _count(msgs, pc.equal(action, MsgAction.SKIP.value))
    out = []
    produced = msgs.filter(pc.fill_null(pc.equal(action, MsgAction.PRODUCE.value), False))
    if produced.num_rows and not delivered:
        channels = pc.unique(pc.drop_null(produced.column("channel"))).to_pylist()
        out.append(
            f"nothing was delivered: {produced.num_rows:,} message(s) produced on "
            f"{_few(sorted(channels)) or 'no named channel'}, none delivered to a consumer "
            "or applied to a store (was the consumer started?)"
        )
    source_writes = _count(
        ops,
        pc.and_(
            pc.and_(
                pc.equal(ops.column("store"), SOURCE_STORE),
                pc.is_in(ops.column("f"), pa.array(sorted(WRITE_FS))),
            ),
            pc.is_in(ops.column("phase"), pa.array(["ok", "info"])),
        ),
    )
    if source_writes and not (delivered or skipped or derived_ops):
        out.append(
            f"nothing reached the derived side: {source_writes:,} source write(s), and no "
            "derived store had a message delivered, applied or skipped, a direct write or "
            "a read"
        )
    return out


def _few(names: list[str], n: int = 5) -> str:
    """At most `n` names, then how many more (a Jepsen history has a channel per key)."""
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(names[:n]) + more


def _missing_faults(h: pa.Table, scheduled: Sequence[dict[str, Any]]) -> list[str]:
    """One line per scheduled fault window that never took effect: not reached before
    the run ended, or not injected (its window closed at once with that error)."""
    if not scheduled:
        return []
    faults = h.filter(pc.fill_null(pc.equal(h.column("type"), EventType.FAULT.value), False))
    failed = {
        r["fault_id"]: r["error"]
        for r in faults.select(["fault_id", "error"]).to_pylist()
        if (r["error"] or "").startswith(_NOT_INJECTED)
    }
    # Windows open in the order of their planned times: the n-th start of a kind on a
    # target is the n-th window of that kind and target in the schedule.
    started: dict[tuple[str, str | None], list[str | None]] = {}
    for r in sorted(faults.to_pylist(), key=lambda r: r["time"]):
        if r["phase"] == FaultPhase.START.value:
            started.setdefault((r["kind"], r["target"]), []).append(r["fault_id"])
    out = []
    for f in sorted(scheduled, key=lambda f: float(f.get("at") or 0)):
        name = f"{f.get('kind')} {f.get('target')} at {f.get('at')} s"
        ids = started.get((f.get("kind"), f.get("target")))
        if not ids:
            out.append(f"scheduled fault {name} never started (the run ended before it)")
            continue
        fault_id = ids.pop(0)
        if fault_id in failed:
            out.append(f"scheduled fault {name}: {failed[fault_id]}")
    return out


def apply(run_dir: RunDir, analysis: dict[str, Any]) -> list[str]:
    """Mark the analysis inconclusive when `reasons` finds any, in analysis.json too
    (the report reads it); returns the lines of what was missing, empty when the
    verdict stands. A forbidden anomaly is kept, but for a loss where nothing
    downstream observed anything."""
    missing = reasons(run_dir)
    why = missing.lines
    forbidden = set(analysis.get("forbidden_found") or [])
    if analysis.get("verdict") != UNEXPECTED:
        forbidden = set()
    if missing.unobserved:
        forbidden -= VACUOUS_UNOBSERVED
    if not why or forbidden:
        return []
    analysis["verdict"] = INCONCLUSIVE
    analysis["inconclusive"] = why
    write_json_atomically(run_dir.analysis, analysis)
    return why
