"""Jepsen's nemesis ops as driftlab fault windows (docs/jepsen.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from driftlab.harness.history.schema import FaultPhase
from driftlab.harness.lab.importers.jepsen.values import index_extra, json_text, op_f, text

# Jepsen nemesis functions that open or close a fault window, besides start-X / stop-X.
_NEMESIS_PAIRS = {
    "kill": (FaultPhase.START, "kill"),
    "start": (FaultPhase.STOP, "kill"),
    "pause": (FaultPhase.START, "pause"),
    "resume": (FaultPhase.STOP, "pause"),
}


class Nemesis:
    """The fault windows a history's nemesis ops open and close, recorded through
    `mark(kind, time, **columns)` and `fault(phase, kind, time, **columns)`."""

    def __init__(self, mark: Callable[..., None], fault: Callable[..., None]) -> None:
        self.mark = mark
        self.fault = fault
        self.pending: set[str] = set()
        self.faults: dict[str, tuple[str, str]] = {}  # open windows: kind -> (id, target)
        self.fault_ids = 0

    def record(self, op: dict[str, Any], t: int) -> None:
        """Nemesis ops come in pairs of :info; the second (the fault took effect)
        opens or closes a fault window."""
        f = op_f(op)
        if f not in self.pending:
            self.pending.add(f)
            return
        self.pending.discard(f)
        if f.startswith("start-"):
            phase, kind = FaultPhase.START, f.removeprefix("start-")
        elif f.startswith("stop-"):
            phase, kind = FaultPhase.STOP, f.removeprefix("stop-")
        elif f in _NEMESIS_PAIRS:
            phase, kind = _NEMESIS_PAIRS[f]
        else:
            index = index_extra(op)
            self.mark(f"nemesis:{f}", t, extra=None if index is None else json_text(index))
            return
        value = text(op.get("value"))
        extra = json_text({"value": value, **(index_extra(op) or {})})
        if phase == FaultPhase.START:
            if kind in self.faults:
                return  # already open: Jepsen may start a fault twice
            self.fault_ids += 1
            # What the nemesis hit (nodes, a partition's grudge), short enough for a label.
            target = "nemesis" if value is None else value[:60]
            fault_id, _ = self.faults[kind] = (f"jepsen-fault{self.fault_ids}", target)
        else:
            if kind not in self.faults:
                return  # a stop with nothing open (Jepsen heals at the end regardless)
            fault_id, target = self.faults.pop(kind)
        self.fault(phase, kind, t, fault_id=fault_id, target=target, extra=extra)
