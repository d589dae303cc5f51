"""Replay of `compacted-log`: PostgreSQL -> Debezium -> a compacted Kafka topic, whose
cleaner compacts when the schedule says; at quiesce the setup's rebuild reads it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from driftlab.harness.lab.explore.schedule import Action, Step, describe
from driftlab.harness.lab.replay.driver import ReplayDriver, refuse, wait_for
from driftlab.harness.lab.replay.turnstile import ReplayError, Turnstile
from driftlab.harness.lab.services.kafka_admin import set_topic_configs
from driftlab.scenarios.architectures.compacted_log.setup import CompactedLog, Record, read_record

HOLD_MS = 3_600_000
"""`min.compaction.lag.ms` between compact steps: an hour, so the cleaner stays away."""

LINGER_MS = 200
"""The connector's producer waits this long to batch a change's records into one append."""


class CompactedLogDriver(ReplayDriver):
    """`compacted-log`: changes captured one at a time, compaction only at `compact`.

    The topic's cleaner is held off by a compaction lag of an hour and a segment rolls
    at every change (`segment.ms` 1), so each change is a segment of its own. Kafka
    never compacts the active segment, which rolls only when the next change is
    appended, so a `compact` step takes effect once the next change is in: the lag
    drops to 0, the replay waits until the topic holds exactly the latest record of
    every key of the closed segments (plus that last change), and the lag goes back.
    That is what the simulator's compaction kept at the step. A `compact` with no
    change after it can only be replayed when the last change's keys have no older
    record left; otherwise the replay refuses it by name.
    """

    def __init__(self, turnstile: Turnstile, params: dict[str, Any]) -> None:
        super().__init__(turnstile, params)
        self.setup = CompactedLog()
        self.params = {
            "segment_ms": 1,
            "compaction_lag_ms": HOLD_MS,
            "await_compaction": False,
            # One append per change: with a segment per append, a delete's event could
            # otherwise close a segment of its own, and the cleaner would drop the key's
            # older record that the simulator kept.
            "linger_ms": LINGER_MS,
        }
        self.records: list[Record] = []  # what the topic holds, in offset order
        self.end = 0  # the topic's end offset after the last change
        self.last: list[int] = []  # offsets of the last change: the active segment
        self.pending = ""  # the compact step waiting for the next change to roll

    def step(self, index: int, step: Step) -> None:
        """db-write or db-delete of a client, or compact."""
        what = f"step {index} ({describe(step)})"
        if step.action == Action.DB_WRITE and step.actor and step.key and step.value:
            self.clients[step.actor].write(step.key, step.value)
            key, value = step.key, step.value
            self._await_change(what, lambda r: r.key == key and r.value == value)
        elif step.action == Action.DB_DELETE and step.actor and step.key:
            self.clients[step.actor].delete(step.key)
            key = step.key
            self._await_change(what, lambda r: r.key == key and r.tombstone)
        elif step.action == Action.COMPACT:
            self.pending = what
            return
        else:
            raise refuse(what, "compacted-log", step)
        if self.pending:
            self._compact(self.pending)
            self.pending = ""

    def _await_change(self, what: str, landed: Callable[[Record], bool]) -> None:
        """Wait until the change's last record is in the topic; it is the new last."""
        deadline = time.monotonic() + 120  # Debezium on a loaded machine
        while True:
            end = self.setup.drain(deadline)
            if end is None:
                raise ReplayError(f"{what}: Debezium did not capture it within 120 s")
            records = [read_record(m) for m in self.setup.read_to(end)]
            new = [r for r in records if r.offset >= self.end]
            if any(landed(r) for r in new):
                self.records, self.last, self.end = records, [r.offset for r in new], end
                return
            time.sleep(0.1)

    def _compact(self, what: str) -> None:
        """Let the cleaner compact the closed segments; wait until it has, exactly."""
        latest = {r.key: r.offset for r in self.records if r.offset not in self.last}
        expect = sorted({*latest.values(), *self.last})
        topic, kafka = self.setup.topic, self.setup.wiring.kafka_direct
        set_topic_configs(kafka, topic, {"min.compaction.lag.ms": "0"})
        try:
            wait_for(
                lambda: [m.offset() for m in self.setup.read_to(self.end)] == expect,
                self.turnstile.timeout,
                lambda: f"{what}: the cleaner did not leave exactly offsets {expect}",
            )
        finally:
            set_topic_configs(kafka, topic, {"min.compaction.lag.ms": str(HOLD_MS)})
        self.records = [r for r in self.records if r.offset in expect]

    def finish(self) -> None:
        """A compact step with no change after it: compact what is closed, if that is
        all the simulator compacted."""
        super().finish()
        if not self.pending:
            return
        last_keys = {r.key for r in self.records if r.offset in self.last}
        older = sorted({r.key for r in self.records if r.offset not in self.last} & last_keys)
        if older:
            raise ReplayError(
                f"{self.pending}: Kafka never compacts the active segment, which holds the "
                f"last change, so the older records of {', '.join(older)} would stay; add a "
                "change after the compact step"
            )
        self._compact(self.pending)
