"""Cheap, incremental anomaly detection inside the search loop.

The reference checkers (checkers/reference) judge whole histories; running all of them
on every one of hundreds of examples per second costs more than the simulation itself.
The simulator therefore tallies, as it runs, the anomaly kinds of docs/checkers.md that
the properties ask about, with the same definitions; the search runs the reference
checkers on the final, minimal schedule, and tests keep the two in agreement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from driftlab.checkers.kinds import (
    DUPLICATE_APPLY,
    DUPLICATE_DELIVERY,
    EXTRA,
    INVARIANT_VIOLATION,
    LOST_MESSAGE,
    LOST_WRITE,
    MISSING,
    PHANTOM,
    REORDER_DELIVERY,
    STALE,
    STALE_OVERWRITE,
)

Finding = tuple[str, str | None, str | None, str | None]
"""(kind, store, key, consumer) of one anomaly, as the checkers' rows identify them."""

SOURCE = "source"


@dataclass(slots=True)
class Tally:
    """Findings so far, and what the final-state kinds need at the end."""

    invariant_min: int | None = None
    findings: set[Finding] = field(default_factory=set)
    committed: dict[str, set[str]] = field(default_factory=dict)
    source_writes: list[tuple[str, str | None]] = field(default_factory=list)
    reached: set[tuple[str, str, str | None]] = field(default_factory=set)
    effect_stores: set[str] = field(default_factory=set)
    top_applied: dict[tuple[str, str], int] = field(default_factory=dict)
    applies: set[tuple[str, str]] = field(default_factory=set)
    top_delivered: dict[tuple[str, str], int] = field(default_factory=dict)
    delivered: set[tuple[str, str]] = field(default_factory=set)
    produced: dict[str, list[str]] = field(default_factory=dict)
    sums: dict[str, int] = field(default_factory=dict)

    def source_write(self, key: str, value: str | None) -> None:
        """An ok source write (None: a delete): a committed value of its key."""
        if value is not None:
            self.committed.setdefault(key, set()).add(value)
        self.source_writes.append((key, value))

    def effect(
        self, store: str, key: str, value: str | None, version: int | None, msg_id: str | None
    ) -> None:
        """A write reaching a derived store (an apply, or a direct client write)."""
        self.reached.add((store, key, value))
        self.effect_stores.add(store)
        if version is not None:
            top = self.top_applied.get((store, key), 0)
            if version < top:
                self.findings.add((STALE_OVERWRITE, store, key, None))
            else:
                self.top_applied[(store, key)] = version
        if msg_id is not None:
            if (store, msg_id) in self.applies:
                self.findings.add((DUPLICATE_APPLY, store, None, None))
            self.applies.add((store, msg_id))

    def skip(self, store: str, key: str, value: str | None) -> None:
        """The consumer saw the write and rightly ignored it."""
        self.reached.add((store, key, value))

    def produce(self, channel: str, msg_id: str) -> None:
        """The broker acknowledged a message."""
        self.produced.setdefault(channel, []).append(msg_id)

    def deliver(self, consumer: str, process: str, msg_id: str, key: str, version: int) -> None:
        """A message reached a consumer's process.

        Order is judged per process, as checkers/reference/reorder.py does: a restarted
        process reading from its committed offset again is redelivery, not reorder.
        """
        if (consumer, msg_id) in self.delivered:
            self.findings.add((DUPLICATE_DELIVERY, None, None, consumer))
        self.delivered.add((consumer, msg_id))
        top = self.top_delivered.get((process, key), 0)
        if version < top:
            self.findings.add((REORDER_DELIVERY, None, key, consumer))
        else:
            self.top_delivered[(process, key)] = version

    def event(self, aggregate: str, delta: int) -> None:
        """An event appended to an aggregate's stream, in version order."""
        total = self.sums.get(aggregate, 0) + delta
        self.sums[aggregate] = total
        if self.invariant_min is not None and total < self.invariant_min:
            self.findings.add((INVARIANT_VIOLATION, None, aggregate, None))

    def done(self, consumer: str, channel: str) -> None:
        """The consumer read all of the channel it ever will: what it missed is lost."""
        for msg_id in self.produced.get(channel, ()):
            if (consumer, msg_id) not in self.delivered:
                self.findings.add((LOST_MESSAGE, None, None, consumer))
                return

    def final(self, source: dict[str, str], derived: dict[str, dict[str, str]]) -> None:
        """After quiescence: lost writes and divergence of every derived store."""
        for store in self.effect_stores:
            for key, value in self.source_writes:
                if (store, key, value) not in self.reached:
                    self.findings.add((LOST_WRITE, store, key, None))
        for store, rows in derived.items():
            for key in source.keys() - rows.keys():
                self.findings.add((MISSING, store, key, None))
            for key in rows.keys() - source.keys():
                self.findings.add((EXTRA, store, key, None))
            for key in rows.keys() & source.keys():
                if rows[key] != source[key]:
                    known = rows[key] in self.committed.get(key, ())
                    self.findings.add((STALE if known else PHANTOM, store, key, None))
