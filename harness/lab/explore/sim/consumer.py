"""Log consumers: a position per partition, received-but-unapplied messages, commits."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

from driftlab.harness.lab.explore.sim.log import LogBroker, Record


class CommitPolicy(StrEnum):
    """What a consumer's commit step commits."""

    AFTER_APPLY = "after-apply"  # offsets of applied messages: at-least-once
    BEFORE_APPLY = "before-apply"  # offsets of received messages: at-most-once (a bug)


@dataclass(slots=True)
class LogConsumer:
    """One consumer group with one process at a time (a restart is a new process)."""

    group: str
    partitions: int
    policy: CommitPolicy = CommitPolicy.AFTER_APPLY
    up: bool = True
    instance: int = 1
    committed: list[int] = field(default_factory=list)
    position: list[int] = field(default_factory=list)
    applied: list[int] = field(default_factory=list)
    pending: deque[tuple[int, Record]] = field(default_factory=deque)
    deliveries: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.committed = [0] * self.partitions
        self.position = [0] * self.partitions
        self.applied = [0] * self.partitions

    @property
    def process(self) -> str:
        """The current process's name, as `process` in the history."""
        return f"{self.group}#{self.instance}"

    def poll(self, broker: LogBroker, partition: int) -> tuple[Record, int] | None:
        """Receive the next record of a partition with its delivery attempt, if any.

        A position below the log start jumps to it (auto.offset.reset = earliest).
        """
        if not self.up:
            return None
        part = broker.partitions[partition]
        rec = part.fetch(max(self.position[partition], part.start))
        if rec is None:
            return None
        self.position[partition] = rec.offset + 1
        self.pending.append((partition, rec))
        attempt = self.deliveries.get(rec.msg_id, 0) + 1
        self.deliveries[rec.msg_id] = attempt
        return rec, attempt

    def take(self) -> tuple[int, Record] | None:
        """The oldest received message to apply now (its offset counts as applied)."""
        if not self.up or not self.pending:
            return None
        partition, rec = self.pending.popleft()
        self.applied[partition] = rec.offset + 1
        return partition, rec

    def commit(self) -> list[tuple[int, int]]:
        """Commit what the policy allows; return the (partition, offset) that moved."""
        if not self.up:
            return []
        upto = self.position if self.policy is CommitPolicy.BEFORE_APPLY else self.applied
        moved = [(p, o) for p, o in enumerate(upto) if o != self.committed[p]]
        for p, o in moved:
            self.committed[p] = o
        return moved

    def crash(self) -> bool:
        """Kill the process: received and uncommitted work is forgotten."""
        if not self.up:
            return False
        self.up = False
        self.pending.clear()
        return True

    def restart(self) -> bool:
        """Start a new process from the committed offsets."""
        if self.up:
            return False
        self.up = True
        self.instance += 1
        self.position = list(self.committed)
        self.applied = list(self.committed)
        return True
