"""The simulator's history: driftlab.harness.history.schema events on a fixed logical clock,
built by the same typed constructors as a real run's (driftlab.harness.history.events)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Unpack

from driftlab.harness.history import events
from driftlab.harness.history.schema import Event, EventType, RunHeader

T0 = 1_767_225_600_000_000_000
"""2026-01-01T00:00:00Z in ns: a fixed epoch, so one schedule gives one history."""
TICK = 1_000_000
"""1 ms of logical time between consecutive events."""


@dataclass(slots=True)
class SimRecorder:
    """Appends events with strictly increasing times and sequence numbers."""

    writer: str = "sim"
    events: list[Event] = field(default_factory=list)

    def header(self, setup: str, params: dict[str, Any]) -> None:
        """The segment's first event, as a real recorder writes it."""
        head = RunHeader(run_id=f"sim-{setup}", scenario=f"explore:{setup}", seed=0, params=params)
        extra = json.dumps(asdict(head), sort_keys=True)
        self._append({"type": EventType.HEADER.value, "extra": extra})

    def op(self, process: str, phase: str, f: str, **fields: Unpack[events.OpFields]) -> None:
        """An OP event (driftlab.harness.history.events.op)."""
        self._append(events.op(process, phase, f, **fields))

    def msg(self, action: str, **fields: Unpack[events.MsgFields]) -> None:
        """A MSG event (driftlab.harness.history.events.msg)."""
        self._append(events.msg(action, **fields))

    def fault(self, phase: str, kind: str, **fields: Unpack[events.FaultFields]) -> None:
        """A FAULT event (driftlab.harness.history.events.fault)."""
        self._append(events.fault(phase, kind, **fields))

    def state(self, store: str, key: str | None, value: str | None, **fields: Any) -> None:
        """A STATE event (driftlab.harness.history.events.state)."""
        self._append(events.state(store, key, value, **fields))

    def mark(self, kind: str, **fields: Unpack[events.MarkFields]) -> None:
        """A MARK event (driftlab.harness.history.events.mark)."""
        self._append(events.mark(kind, **fields))

    def _append(self, fields: events.Fields) -> None:
        extra = fields.get("extra")
        if isinstance(extra, dict):
            fields["extra"] = json.dumps(extra, sort_keys=True)
        seq = len(self.events)
        self.events.append(Event(time=T0 + seq * TICK, writer=self.writer, seq=seq, **fields))


def to_jsonl(events: Iterable[Event]) -> str:
    """A history as one JSON-lines segment, readable by driftlab.harness.history.reader."""
    return "".join(json.dumps(e.to_dict(), separators=(",", ":")) + "\n" for e in events)
