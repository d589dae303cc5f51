"""The simulator twin of the cdc architecture: what `driftlab explore` runs."""

from __future__ import annotations

from typing import Any

from driftlab.harness.history.schema import FaultPhase, Mark, MsgAction
from driftlab.harness.lab.explore.schedule import Action, Step
from driftlab.harness.lab.explore.sim.consumer import CommitPolicy, LogConsumer
from driftlab.harness.lab.explore.sim.kv import KeyValueStore
from driftlab.harness.lab.explore.sim.log import LogBroker
from driftlab.harness.lab.explore.sim.machine import DbSim, handling
from driftlab.harness.lab.explore.spec import CLIENTS, KEYS, Move, SetupSpec, spec


class CdcSim(DbSim):
    """C3/C4/C5/C14/C15: the database's change log -> a partitioned log -> one consumer.

    `policy` says what the consumer commits; `effect` is `versioned` (idempotent:
    apply only a newer version, else skip) or `counter` (add one per message).
    """

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        p = self.params
        self.channel = p.get("channel", "cdc")
        self.counter = p.get("effect", "versioned") == "counter"
        self.store = KeyValueStore("counter" if self.counter else "cache")
        self.log = LogBroker.create(p.get("partitions", 2))
        policy = CommitPolicy(p.get("policy", CommitPolicy.AFTER_APPLY))
        self.consumer = LogConsumer("g", len(self.log.partitions), policy)
        self.link = f"g->{self.store.name}"
        self.crash_id = ""

    def step(self, step: Step) -> Step | None:
        a = step.action
        if a == Action.DB_WRITE and step.actor and step.key:
            value, version, lsn = self.write_source(step.actor, step.key, self.counter)
            self.capture(self.log, step.key, value, version, lsn)
            return Step(Action.DB_WRITE, step.actor, step.key, value)
        if a == Action.DB_DELETE and step.actor and step.key and not self.counter:
            return self.delete(step.actor, step.key, self.log)
        if a == Action.POLL and step.partition is not None:
            return self.poll(step.partition)
        if a == Action.APPLY and self.link not in self.cut:
            return self.apply()
        if a == Action.COMMIT:
            return self.commit()
        if a == Action.CRASH and self.consumer.crash():
            self.crash_id = self.fault(FaultPhase.START, "kill", self.consumer.process)
            return Step(Action.CRASH, "g")
        if a == Action.RESTART and self.consumer.restart():
            killed = f"g#{self.consumer.instance - 1}"
            self.fault(FaultPhase.STOP, "kill", killed, self.crash_id)
            return Step(Action.RESTART, "g")
        if a == Action.PARTITION and step.target == self.link:
            return self.partition(self.link)
        if a == Action.HEAL:
            return self.heal()
        return None

    def poll(self, partition: int) -> Step | None:
        if partition >= len(self.log.partitions):
            return None
        got = self.consumer.poll(self.log, partition)
        if got is None:
            return None
        rec, attempt = got
        return self.delivered("g", self.consumer.process, partition, rec, attempt)

    def apply(self) -> Step | None:
        got = self.consumer.take()
        if got is None:
            return None
        partition, rec = got
        if not self.counter:
            return self.apply_newer(self.store, "g", self.consumer.process, partition, rec)
        value = self.store.increment(rec.key, rec.version)
        fields = handling("g", self.consumer.process, self.channel, rec, partition)
        self.rec.msg(MsgAction.APPLY, **(fields | {"value": value}), store=self.store.name)
        self.tally.effect(self.store.name, rec.key, value, rec.version, rec.msg_id)
        return Step(Action.APPLY, "g", rec.key, rec.value, partition, rec.offset)

    def commit(self) -> Step | None:
        moved = self.consumer.commit()
        for partition, offset in moved:
            self.rec.msg(
                MsgAction.COMMIT,
                consumer="g",
                process=self.consumer.process,
                channel=self.channel,
                partition=partition,
                offset=offset,
            )
        return Step(Action.COMMIT, "g") if moved else None

    def drain(self) -> None:
        self.step(Step(Action.RESTART, "g"))  # enabled only if it was down
        for p in range(len(self.log.partitions)):
            while self.poll(p) is not None:
                self.apply()
        while self.apply() is not None:
            pass
        self.commit()
        self.mark(Mark.CONSUMER_DONE, consumer="g", channel=self.channel)
        self.tally.done("g", self.channel)

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        return self.source_rows(), {self.store.name: self.store.values()}


def cdc_moves(partitions: int, store: str) -> tuple[Move, ...]:
    """The steps of a CDC schedule: writes, polls of `partitions`, applies, commits,
    consumer crashes and a partition of the consumer from `store`."""
    # Deletes come last: the shrinker prefers earlier moves, and only a setup whose
    # store is versioned can take a tombstone (a counter has no delete).
    deletes = () if store == "counter" else (Move(Action.DB_DELETE, CLIENTS[:2], KEYS),)
    return (
        Move(Action.DB_WRITE, CLIENTS[:2], KEYS),
        Move(Action.POLL, ("g",), partitions=tuple(range(partitions))),
        Move(Action.APPLY, ("g",)),
        Move(Action.COMMIT, ("g",)),
        Move(Action.CRASH, ("g",)),
        Move(Action.RESTART, ("g",)),
        Move(Action.PARTITION, targets=(f"g->{store}",)),
        Move(Action.HEAL),
        *deletes,
    )


def cdc_spec(
    name: str, summary: str, claims: tuple[str, ...], *, partitions: int = 2, **params: Any
) -> SetupSpec:
    """A simulated CDC pipeline: `CdcSim` over a log of `partitions`, with its moves;
    `params` as `CdcSim` takes them (`policy`, `effect`, `channel`)."""
    store = "counter" if params.get("effect") == "counter" else "cache"
    moves = cdc_moves(partitions, store)
    return spec(name, summary, claims, CdcSim, moves, partitions=partitions, **params)


SIMS: tuple[SetupSpec, ...] = (
    cdc_spec(
        "cdc",
        "db change log -> 2-partition log -> consumer that commits after an "
        "idempotent, version-checked apply",
        ("C3", "C8", "C15"),
        policy="after-apply",
    ),
    cdc_spec(
        "cdc-commit-before",
        "cdc whose consumer commits offsets before applying (a planted bug)",
        ("C4",),
        policy="before-apply",
    ),
    cdc_spec(
        "cdc-counter",
        "cdc whose consumer adds one to a counter per message "
        "(not idempotent), committing after apply",
        ("C5",),
        partitions=1,
        policy="after-apply",
        effect="counter",
    ),
)
"""The simulated setups of this architecture."""
