"""The simulator twin of the compacted-log architecture: what `driftlab explore` runs."""

from __future__ import annotations

from typing import Any

from driftlab.harness.history.schema import Mark
from driftlab.harness.lab.explore.schedule import Action, Step
from driftlab.harness.lab.explore.sim.consumer import LogConsumer
from driftlab.harness.lab.explore.sim.kv import KeyValueStore
from driftlab.harness.lab.explore.sim.log import LogBroker
from driftlab.harness.lab.explore.sim.machine import DbSim
from driftlab.harness.lab.explore.spec import CLIENTS, KEYS, Move, SetupSpec, spec


class CompactedLogSim(DbSim):
    """C9: a compacted one-partition log; at quiesce a new consumer rebuilds from offset 0."""

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.log = LogBroker.create(1)
        self.store = KeyValueStore("rebuild")

    def capture(self, log: LogBroker, key: str, value: str | None, version: int, lsn: int) -> None:
        """Append without a `produce` event: the real setup records none (only its rebuild
        reads the log, after compaction), and the twin records what the real one does."""
        log.partitions[0].append(key, value, version, f"m{lsn}")

    def step(self, step: Step) -> Step | None:
        if step.action == Action.DB_WRITE and step.actor and step.key:
            value, version, lsn = self.write_source(step.actor, step.key)
            self.capture(self.log, step.key, value, version, lsn)
            return Step(Action.DB_WRITE, step.actor, step.key, value)
        if step.action == Action.DB_DELETE and step.actor and step.key:
            return self.delete(step.actor, step.key, self.log)
        if step.action == Action.COMPACT:
            part = self.log.partitions[0]
            held = len(part.records)
            part.compact()
            return Step(Action.COMPACT, partition=0) if len(part.records) < held else None
        return None

    def drain(self) -> None:
        """A new derived store is built by reading the whole compacted log from 0."""
        consumer = LogConsumer("rebuild", 1)
        while (got := consumer.poll(self.log, 0)) is not None:
            rec, attempt = got
            consumer.take()
            self.delivered("rebuild", consumer.process, 0, rec, attempt)
            self.apply_newer(self.store, "rebuild", consumer.process, 0, rec)
        self.mark(Mark.CONSUMER_DONE, consumer="rebuild", channel=self.channel)
        self.tally.done("rebuild", self.channel)

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        return self.source_rows(), {"rebuild": self.store.values()}


SIMS: tuple[SetupSpec, ...] = (
    spec(
        "compacted-log",
        "a compacted log the broker may compact at any step; at quiesce a new "
        "consumer rebuilds a store from offset 0",
        ("C9",),
        CompactedLogSim,
        (
            Move(Action.DB_WRITE, CLIENTS[:2], KEYS),
            Move(Action.COMPACT),
            Move(Action.DB_DELETE, CLIENTS[:2], KEYS),
        ),
    ),
)
"""The simulated setups of this architecture."""
