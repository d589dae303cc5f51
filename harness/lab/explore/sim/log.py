"""A log-based broker: partitions of offsets, bounded retention, compaction."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Record:
    """One message at one offset of a partition."""

    offset: int
    key: str
    value: str | None  # None: a tombstone, the key was deleted
    version: int
    msg_id: str


@dataclass(slots=True)
class Partition:
    """An append-only sequence of records; old ones go when retention is exceeded."""

    retention: int | None = None  # records kept; None keeps every record
    records: list[Record] = field(default_factory=list)
    next_offset: int = 0

    @property
    def start(self) -> int:
        """The log start offset: the oldest offset still held (next_offset if empty)."""
        return self.records[0].offset if self.records else self.next_offset

    def append(self, key: str, value: str | None, version: int, msg_id: str) -> Record:
        """Append at the next offset; drop the oldest records beyond retention."""
        rec = Record(self.next_offset, key, value, version, msg_id)
        self.records.append(rec)
        self.next_offset += 1
        if self.retention is not None and len(self.records) > self.retention:
            del self.records[: len(self.records) - self.retention]
        return rec

    def fetch(self, position: int) -> Record | None:
        """The first record at or after `position` (skipping compacted gaps), if any."""
        for rec in self.records:
            if rec.offset >= position:
                return rec
        return None

    def compact(self) -> None:
        """Keep only the latest record of every key (tombstones too); offsets stay."""
        latest = {rec.key: rec.offset for rec in self.records}
        self.records = [rec for rec in self.records if latest[rec.key] == rec.offset]


@dataclass(slots=True)
class LogBroker:
    """A topic: records go to a partition by a stable hash of their key."""

    partitions: list[Partition]

    @classmethod
    def create(cls, count: int, retention: int | None = None) -> LogBroker:
        """A topic of `count` empty partitions."""
        return cls([Partition(retention) for _ in range(count)])

    def partition_for(self, key: str) -> int:
        """Stable across processes and runs (unlike Python's salted hash)."""
        return zlib.crc32(key.encode()) % len(self.partitions)
