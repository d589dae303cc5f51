"""The simulator's history: harness.history.schema events on a fixed logical clock."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.history.schema import Event, EventType, RunHeader

T0 = 1_767_225_600_000_000_000
"""2026-01-01T00:00:00Z in ns: a fixed epoch, so one schedule gives one history."""
TICK = 1_000_000
"""1 ms of logical time between consecutive events."""


@dataclass(slots=True)
class Recorder:
    """Appends events with strictly increasing times and sequence numbers."""

    writer: str = "sim"
    events: list[Event] = field(default_factory=list)

    def header(self, setup: str, params: dict[str, Any]) -> None:
        """The segment's first event, as a real recorder writes it."""
        head = RunHeader(run_id=f"sim-{setup}", scenario=f"explore:{setup}", seed=0, params=params)
        self.emit(EventType.HEADER, extra=json.dumps(asdict(head), sort_keys=True))

    def emit(self, type: str, **fields: Any) -> Event:
        """Record one event and return it."""
        seq = len(self.events)
        event = Event(type=type, time=T0 + seq * TICK, writer=self.writer, seq=seq, **fields)
        self.events.append(event)
        return event


def to_jsonl(events: Iterable[Event]) -> str:
    """A history as one JSON-lines segment, readable by harness.history.reader."""
    return "".join(json.dumps(e.to_dict(), separators=(",", ":")) + "\n" for e in events)
