"""An event store: one stream per aggregate, appends with an optional expected version."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class EventStore:
    """Streams of integer deltas; the stream's length is the aggregate's version."""

    streams: dict[str, list[int]] = field(default_factory=dict)
    position: int = 0  # global append position across streams

    def version(self, aggregate: str) -> int:
        """The number of events of the aggregate (0 for a new one)."""
        return len(self.streams.get(aggregate, ()))

    def balance(self, aggregate: str) -> int:
        """The fold of the aggregate's events: the sum of its deltas."""
        return sum(self.streams.get(aggregate, ()))

    def append(self, aggregate: str, delta: int, expected: int | None = None) -> int | None:
        """Append; with `expected` set, refuse (None) unless the version still matches.

        Returns the new event's version (its sequence number in the stream).
        """
        stream = self.streams.setdefault(aggregate, [])
        if expected is not None and expected != len(stream):
            return None
        stream.append(delta)
        self.position += 1
        return len(stream)
