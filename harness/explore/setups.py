"""The simulated setups, each a small machine driven one step at a time by a schedule.

Every setup records the same history a real run of it records (op, msg, fault, mark and
state events of harness.history.schema) and tallies the cheap anomaly kinds as it goes.
A step that is not enabled in the current state is skipped: `step` returns None.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.explore.schedule import Action, Step
from harness.explore.sim.consumer import CommitPolicy, LogConsumer
from harness.explore.sim.database import Database
from harness.explore.sim.eventstore import EventStore
from harness.explore.sim.kv import KeyValueStore
from harness.explore.sim.log import LogBroker
from harness.explore.sim.queue import Message, Queue
from harness.explore.sim.recorder import Recorder
from harness.explore.sim.tally import Finding, Tally
from harness.history.schema import (
    SOURCE_STORE,
    Event,
    EventType,
    FaultPhase,
    Mark,
    MsgAction,
    OpPhase,
)

CLIENTS = ("c1", "c2", "c3")
KEYS = ("k1", "k2")


@dataclass(frozen=True, slots=True)
class Move:
    """One kind of step a schedule of a setup may hold, with the actors it may name."""

    action: Action
    actors: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    partitions: tuple[int, ...] = ()
    targets: tuple[str, ...] = ()


@dataclass(slots=True)
class SimResult:
    """What one schedule did: the steps that ran, the history, the tallied findings."""

    executed: list[Step]
    events: list[Event]
    findings: set[Finding]


class Sim(ABC):
    """Common machinery: the recorder, the tally, clients' fresh values, faults."""

    name: str = ""
    params: dict[str, Any]

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        self.name = name or self.name
        self.params = dict(params or {})
        self.rec = Recorder()
        self.tally = Tally(invariant_min=self._invariant_min())
        self.rec.header(self.name, self.params)
        self._writes: dict[str, int] = {}
        self._ops = 0
        self._faults = 0
        self.cut: dict[str, str] = {}  # link -> fault_id

    def _invariant_min(self) -> int | None:
        return None

    # -- driving ---------------------------------------------------------------------
    @abstractmethod
    def step(self, step: Step) -> Step | None:
        """Run one step if enabled; return it as executed (values filled) or None."""

    def finish(self) -> list[Step]:
        """Clients complete their operations in flight (no client crashes here)."""
        return []

    @abstractmethod
    def drain(self) -> None:
        """Consumers read and apply everything left; mark each consumer done."""

    @abstractmethod
    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        """The source's rows (None when there is no source) and each derived store's."""

    def run(self, steps: Iterable[Step]) -> SimResult:
        """Run a schedule to its end, then quiesce; return what happened."""
        executed = [done for s in steps if (done := self.step(s)) is not None]
        executed += self.finish()
        executed.append(Step(Action.QUIESCE))
        self.quiesce()
        return SimResult(executed, self.rec.events, self.tally.findings)

    def quiesce(self) -> None:
        """Heal, restart, drain, then record the final state of every store."""
        self.mark(Mark.WORKLOAD_DONE)
        self.heal()
        self.mark(Mark.HEALED)
        self.drain()
        self.mark(Mark.QUIESCED)
        source, derived = self.final_states()
        versions = self.final_versions()
        stores = ({SOURCE_STORE: source} if source is not None else {}) | derived
        for store in sorted(stores):
            rows = stores[store]
            if not rows:  # a store read empty still says so
                self.rec.emit(EventType.STATE, store=store)
            for key in sorted(rows):
                version = versions.get(key) if store == SOURCE_STORE else None
                self.rec.emit(
                    EventType.STATE, store=store, key=key, value=rows[key], version=version
                )
        self.tally.final(source or {}, derived if source is not None else {})
        self.mark(Mark.END)

    def final_versions(self) -> dict[str, int]:
        """The source's version of every key, for its state events."""
        return {}

    # -- recording helpers -------------------------------------------------------------
    def mark(self, kind: str, **fields: Any) -> None:
        self.rec.emit(EventType.MARK, kind=kind, **fields)

    def fresh_value(self, client: str) -> str:
        """A value unique across the run, as harness.history.values makes them."""
        n = self._writes.get(client, 0) + 1
        self._writes[client] = n
        return f"{client}-{n}"

    def op(self, client: str, f: str, key: str, value: str | None, store: str) -> str:
        """Record an invoke; return the op id for its completion."""
        self._ops += 1
        op_id = f"op{self._ops}"
        self.rec.emit(
            EventType.OP,
            process=client,
            phase=OpPhase.INVOKE,
            f=f,
            key=key,
            value=value,
            store=store,
            op_id=op_id,
        )
        return op_id

    def done(self, op_id: str, client: str, f: str, key: str, phase: str, **fields: Any) -> None:
        self.rec.emit(
            EventType.OP, process=client, phase=phase, f=f, key=key, op_id=op_id, **fields
        )

    def fault(self, phase: str, kind: str, target: str, fault_id: str | None = None) -> str:
        if fault_id is None:
            self._faults += 1
            fault_id = f"f{self._faults}"
        self.rec.emit(EventType.FAULT, phase=phase, kind=kind, target=target, fault_id=fault_id)
        return fault_id

    def partition(self, link: str) -> Step | None:
        if link in self.cut:
            return None
        self.cut[link] = self.fault(FaultPhase.START, "partition", link)
        return Step(Action.PARTITION, target=link)

    def heal(self) -> Step | None:
        if not self.cut:
            return None
        for link, fault_id in sorted(self.cut.items()):
            self.fault(FaultPhase.STOP, "partition", link, fault_id)
        self.cut.clear()
        return Step(Action.HEAL)


class DualWriteSim(Sim):
    """C1/C2: each client writes the database, then the same value to the cache.

    A client crash step between the two writes (C2) abandons the cache write.
    """

    name = "dual-write"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.db = Database()
        self.cache = KeyValueStore("cache")
        self.inflight: dict[str, tuple[str, str, int]] = {}

    def step(self, step: Step) -> Step | None:
        client = step.actor or ""
        if step.action == Action.DB_WRITE and client not in self.inflight and step.key:
            value = self.fresh_value(client)
            op_id = self.op(client, "write", step.key, value, SOURCE_STORE)
            version, lsn = self.db.write(step.key, value)
            self.done(
                op_id,
                client,
                "write",
                step.key,
                OpPhase.OK,
                value=value,
                version=version,
                store=SOURCE_STORE,
                source_pos=lsn,
            )
            self.tally.source_write(step.key, value)
            self.inflight[client] = (step.key, value, version)
            return Step(Action.DB_WRITE, client, step.key, value)
        if step.action == Action.CRASH and client in self.inflight:
            # The application dies between its two writes; a new process takes over.
            self.mark("app-crash", process=client)
            key, value, _ = self.inflight.pop(client)
            return Step(Action.CRASH, client, key, value)
        if step.action == Action.CACHE_WRITE and client in self.inflight:
            key, value, version = self.inflight.pop(client)
            op_id = self.op(client, "write", key, value, "cache")
            self.cache.put(key, value, version)
            self.done(
                op_id, client, "write", key, OpPhase.OK, value=value, version=version, store="cache"
            )
            self.tally.effect("cache", key, value, version, None)
            return Step(Action.CACHE_WRITE, client, key, value)
        return None

    def finish(self) -> list[Step]:
        return [s for c in sorted(self.inflight) if (s := self.step(Step(Action.CACHE_WRITE, c)))]

    def drain(self) -> None:
        """No consumers: the application writes the cache itself."""

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        source = {k: v for k, (v, _) in self.db.rows.items()}
        return source, {"cache": {k: v for k, (v, _) in self.cache.rows.items()}}

    def final_versions(self) -> dict[str, int]:
        return {k: ver for k, (_, ver) in self.db.rows.items()}


class CdcSim(Sim):
    """C3/C4/C5/C14/C15: the database's change log -> a partitioned log -> one consumer.

    `policy` says what the consumer commits; `effect` is `versioned` (idempotent:
    apply only a newer version, else skip) or `counter` (add one per message).
    """

    name = "cdc"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        p = self.params
        self.channel: str = p.get("channel", "cdc")
        self.counter = p.get("effect", "versioned") == "counter"
        self.store = KeyValueStore("counter" if self.counter else "cache")
        self.db = Database()
        self.log = LogBroker.create(p.get("partitions", 2))
        policy = CommitPolicy(p.get("policy", CommitPolicy.AFTER_APPLY))
        self.consumer = LogConsumer("g", len(self.log.partitions), policy)
        self.link = f"g->{self.store.name}"
        self.crash_id = ""

    def step(self, step: Step) -> Step | None:
        a = step.action
        if a == Action.DB_WRITE and step.actor and step.key:
            return self.write(step.actor, step.key)
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

    def write(self, client: str, key: str) -> Step:
        if self.counter:
            op_id = self.op(client, "increment", key, None, SOURCE_STORE)
            value, version, lsn = self.db.increment(key)
            f = "increment"
        else:
            value = self.fresh_value(client)
            op_id = self.op(client, "write", key, value, SOURCE_STORE)
            version, lsn = self.db.write(key, value)
            f = "write"
        self.done(
            op_id,
            client,
            f,
            key,
            OpPhase.OK,
            value=value,
            version=version,
            store=SOURCE_STORE,
            source_pos=lsn,
        )
        self.tally.source_write(key, value)
        # The connector captures the commit in commit order (Debezium reading the WAL).
        partition = self.log.partition_for(key)
        msg_id = f"m{lsn}"
        rec = self.log.partitions[partition].append(key, value, version, msg_id)
        self.rec.emit(
            EventType.MSG,
            action=MsgAction.PRODUCE,
            channel=self.channel,
            partition=partition,
            offset=rec.offset,
            msg_id=msg_id,
            key=key,
            value=value,
            version=version,
            source_pos=lsn,
        )
        self.tally.produce(self.channel, msg_id)
        return Step(Action.DB_WRITE, client, key, value)

    def poll(self, partition: int) -> Step | None:
        if partition >= len(self.log.partitions):
            return None
        got = self.consumer.poll(self.log, partition)
        if got is None:
            return None
        rec, attempt = got
        self.rec.emit(
            EventType.MSG,
            action=MsgAction.DELIVER,
            consumer="g",
            process=self.consumer.process,
            channel=self.channel,
            partition=partition,
            offset=rec.offset,
            msg_id=rec.msg_id,
            key=rec.key,
            value=rec.value,
            version=rec.version,
            attempt=attempt,
        )
        self.tally.deliver("g", self.consumer.process, rec.msg_id, rec.key, rec.version)
        return Step(Action.POLL, "g", rec.key, rec.value, partition, rec.offset)

    def apply(self) -> Step | None:
        got = self.consumer.take()
        if got is None:
            return None
        partition, rec = got
        store = self.store.name
        common = dict(
            consumer="g",
            process=self.consumer.process,
            channel=self.channel,
            partition=partition,
            offset=rec.offset,
            msg_id=rec.msg_id,
            key=rec.key,
            version=rec.version,
            store=store,
        )
        if self.counter:
            value = self.store.increment(rec.key, rec.version)
            self.rec.emit(EventType.MSG, action=MsgAction.APPLY, value=value, **common)
            self.tally.effect(store, rec.key, value, rec.version, rec.msg_id)
        elif self.store.put_if_newer(rec.key, rec.value, rec.version):
            self.rec.emit(EventType.MSG, action=MsgAction.APPLY, value=rec.value, **common)
            self.tally.effect(store, rec.key, rec.value, rec.version, rec.msg_id)
        else:
            self.rec.emit(EventType.MSG, action=MsgAction.SKIP, value=rec.value, **common)
            self.tally.skip(store, rec.key, rec.value)
        return Step(Action.APPLY, "g", rec.key, rec.value, partition, rec.offset)

    def commit(self) -> Step | None:
        moved = self.consumer.commit()
        for partition, offset in moved:
            self.rec.emit(
                EventType.MSG,
                action=MsgAction.COMMIT,
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
        source = {k: v for k, (v, _) in self.db.rows.items()}
        return source, {self.store.name: {k: v for k, (v, _) in self.store.rows.items()}}

    def final_versions(self) -> dict[str, int]:
        return {k: ver for k, (_, ver) in self.db.rows.items()}


class AmqpSim(Sim):
    """C7: commits go to an AMQP queue; competing workers (prefetch 1) overwrite the cache."""

    name = "amqp"
    channel = "updates"
    group = "workers"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.db = Database()
        self.queue = Queue()
        self.cache = KeyValueStore("cache")
        workers = self.params.get("workers", 2)
        self.workers = [f"w{i + 1}" for i in range(workers)]
        self.up = dict.fromkeys(self.workers, True)
        self.instance = dict.fromkeys(self.workers, 1)
        self.holding: dict[str, tuple[Message, int]] = {}
        self.crash_ids: dict[str, str] = {}

    def process(self, worker: str) -> str:
        return f"{worker}#{self.instance[worker]}"

    def step(self, step: Step) -> Step | None:
        a, w = step.action, step.actor or ""
        if a == Action.DB_WRITE and step.key and w:
            return self.write(w, step.key)
        if w not in self.up:
            return None
        if a == Action.POLL and self.up[w] and w not in self.holding:
            got = self.queue.take()
            if got is None:
                return None
            msg, attempt = got
            self.holding[w] = (msg, attempt)
            self.rec.emit(
                EventType.MSG,
                action=MsgAction.DELIVER,
                consumer=self.group,
                process=self.process(w),
                channel=self.channel,
                msg_id=msg.msg_id,
                key=msg.key,
                value=msg.value,
                version=msg.version,
                attempt=attempt,
            )
            self.tally.deliver(self.group, self.process(w), msg.msg_id, msg.key, msg.version)
            return Step(Action.POLL, w, msg.key, msg.value)
        if a == Action.APPLY and self.up[w] and w in self.holding:
            msg, attempt = self.holding.pop(w)
            common = dict(
                consumer=self.group,
                process=self.process(w),
                channel=self.channel,
                msg_id=msg.msg_id,
                key=msg.key,
                value=msg.value,
                version=msg.version,
            )
            # A plain worker overwrites: updates of one key do not commute.
            self.cache.put(msg.key, msg.value, msg.version)
            self.rec.emit(EventType.MSG, action=MsgAction.APPLY, store="cache", **common)
            self.tally.effect("cache", msg.key, msg.value, msg.version, msg.msg_id)
            self.rec.emit(EventType.MSG, action=MsgAction.ACK, attempt=attempt, **common)
            return Step(Action.APPLY, w, msg.key, msg.value)
        if a == Action.CRASH and self.up[w]:
            self.up[w] = False
            self.crash_ids[w] = self.fault(FaultPhase.START, "kill", self.process(w))
            if w in self.holding:
                self.queue.requeue(self.holding.pop(w)[0])
            return Step(Action.CRASH, w)
        if a == Action.RESTART and not self.up[w]:
            self.up[w] = True
            self.fault(FaultPhase.STOP, "kill", self.process(w), self.crash_ids.pop(w))
            self.instance[w] += 1
            return Step(Action.RESTART, w)
        return None

    def write(self, client: str, key: str) -> Step:
        value = self.fresh_value(client)
        op_id = self.op(client, "write", key, value, SOURCE_STORE)
        version, lsn = self.db.write(key, value)
        self.done(
            op_id,
            client,
            "write",
            key,
            OpPhase.OK,
            value=value,
            version=version,
            store=SOURCE_STORE,
            source_pos=lsn,
        )
        self.tally.source_write(key, value)
        msg_id = f"m{lsn}"
        self.queue.publish(Message(msg_id, key, value, version))
        self.rec.emit(
            EventType.MSG,
            action=MsgAction.PRODUCE,
            channel=self.channel,
            msg_id=msg_id,
            key=key,
            value=value,
            version=version,
            source_pos=lsn,
        )
        self.tally.produce(self.channel, msg_id)
        return Step(Action.DB_WRITE, client, key, value)

    def drain(self) -> None:
        """Live workers drain first: the broker hands a dead worker's unacked messages
        to a live one at once (Figure 11-2); crashed workers restart afterwards."""
        self.work()
        for w in self.workers:
            self.step(Step(Action.RESTART, w))
        self.work()
        self.mark(Mark.CONSUMER_DONE, consumer=self.group, channel=self.channel)
        self.tally.done(self.group, self.channel)

    def work(self) -> None:
        """Every live worker applies what it holds or takes the next, until none can."""
        progress = True
        while progress:
            progress = False
            for w in self.workers:
                action = Action.APPLY if w in self.holding else Action.POLL
                progress |= self.step(Step(action, w)) is not None

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        source = {k: v for k, (v, _) in self.db.rows.items()}
        return source, {"cache": {k: v for k, (v, _) in self.cache.rows.items()}}

    def final_versions(self) -> dict[str, int]:
        return {k: ver for k, (_, ver) in self.db.rows.items()}


class BoundedLogSim(Sim):
    """C6: a one-partition log keeping `retention` records; `fast` keeps up, `slow` polls."""

    name = "bounded-log"
    channel = "cdc"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.db = Database()
        self.log = LogBroker.create(1, retention=self.params.get("retention", 3))
        self.consumers = {g: LogConsumer(g, 1) for g in ("fast", "slow")}

    def step(self, step: Step) -> Step | None:
        if step.action == Action.DB_WRITE and step.actor and step.key:
            value = self.fresh_value(step.actor)
            op_id = self.op(step.actor, "write", step.key, value, SOURCE_STORE)
            version, lsn = self.db.write(step.key, value)
            self.done(
                op_id,
                step.actor,
                "write",
                step.key,
                OpPhase.OK,
                value=value,
                version=version,
                store=SOURCE_STORE,
                source_pos=lsn,
            )
            self.tally.source_write(step.key, value)
            msg_id = f"m{lsn}"
            rec = self.log.partitions[0].append(step.key, value, version, msg_id)
            self.rec.emit(
                EventType.MSG,
                action=MsgAction.PRODUCE,
                channel=self.channel,
                partition=0,
                offset=rec.offset,
                msg_id=msg_id,
                key=step.key,
                value=value,
                version=version,
                source_pos=lsn,
            )
            self.tally.produce(self.channel, msg_id)
            self.poll("fast")  # the fast consumer keeps up with every write
            return Step(Action.DB_WRITE, step.actor, step.key, value)
        if step.action == Action.POLL and step.actor == "slow":
            return self.poll("slow")
        return None

    def poll(self, group: str) -> Step | None:
        consumer = self.consumers[group]
        got = consumer.poll(self.log, 0)
        if got is None:
            return None
        consumer.take()  # received means processed: this setup has no derived store
        rec, attempt = got
        self.rec.emit(
            EventType.MSG,
            action=MsgAction.DELIVER,
            consumer=group,
            process=consumer.process,
            channel=self.channel,
            partition=0,
            offset=rec.offset,
            msg_id=rec.msg_id,
            key=rec.key,
            value=rec.value,
            version=rec.version,
            attempt=attempt,
        )
        self.tally.deliver(group, consumer.process, rec.msg_id, rec.key, rec.version)
        return Step(Action.POLL, group, rec.key, rec.value, 0, rec.offset)

    def drain(self) -> None:
        for group in self.consumers:
            while self.poll(group) is not None:
                pass
            self.mark(Mark.CONSUMER_DONE, consumer=group, channel=self.channel)
            self.tally.done(group, self.channel)

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        return {k: v for k, (v, _) in self.db.rows.items()}, {}

    def final_versions(self) -> dict[str, int]:
        return {k: ver for k, (_, ver) in self.db.rows.items()}


class CompactedLogSim(Sim):
    """C9: a compacted one-partition log; at quiesce a new consumer rebuilds from offset 0."""

    channel = "cdc"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.db = Database()
        self.log = LogBroker.create(1)
        self.store = KeyValueStore("rebuild")

    def step(self, step: Step) -> Step | None:
        if step.action == Action.DB_WRITE and step.actor and step.key:
            value = self.fresh_value(step.actor)
            op_id = self.op(step.actor, "write", step.key, value, SOURCE_STORE)
            version, lsn = self.db.write(step.key, value)
            self.done(
                op_id,
                step.actor,
                "write",
                step.key,
                OpPhase.OK,
                value=value,
                version=version,
                store=SOURCE_STORE,
                source_pos=lsn,
            )
            self.tally.source_write(step.key, value)
            msg_id = f"m{lsn}"
            rec = self.log.partitions[0].append(step.key, value, version, msg_id)
            self.rec.emit(
                EventType.MSG,
                action=MsgAction.PRODUCE,
                channel=self.channel,
                partition=0,
                offset=rec.offset,
                msg_id=msg_id,
                key=step.key,
                value=value,
                version=version,
                source_pos=lsn,
            )
            self.tally.produce(self.channel, msg_id)
            return Step(Action.DB_WRITE, step.actor, step.key, value)
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
            common = dict(
                consumer="rebuild",
                process=consumer.process,
                channel=self.channel,
                partition=0,
                offset=rec.offset,
                msg_id=rec.msg_id,
                key=rec.key,
                value=rec.value,
                version=rec.version,
            )
            self.rec.emit(EventType.MSG, action=MsgAction.DELIVER, attempt=attempt, **common)
            self.tally.deliver("rebuild", consumer.process, rec.msg_id, rec.key, rec.version)
            if self.store.put_if_newer(rec.key, rec.value, rec.version):
                self.rec.emit(EventType.MSG, action=MsgAction.APPLY, store="rebuild", **common)
                self.tally.effect("rebuild", rec.key, rec.value, rec.version, rec.msg_id)
            else:
                self.rec.emit(EventType.MSG, action=MsgAction.SKIP, store="rebuild", **common)
                self.tally.skip("rebuild", rec.key, rec.value)
        self.mark(Mark.CONSUMER_DONE, consumer="rebuild", channel=self.channel)
        self.tally.done("rebuild", self.channel)

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        source = {k: v for k, (v, _) in self.db.rows.items()}
        return source, {"rebuild": {k: v for k, (v, _) in self.store.rows.items()}}

    def final_versions(self) -> dict[str, int]:
        return {k: ver for k, (_, ver) in self.db.rows.items()}


class EventSourcedSim(Sim):
    """C11/C12: commands validated against a replayed aggregate, events appended.

    With `check`, an append carries the version its validation read (optimistic
    concurrency) and fails if another event landed in between.
    """

    name = "event-sourced"
    channel = "events"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        params = {"invariant": {"min": 0}, "check": False, **(params or {})}
        super().__init__(params, name)
        self.store = EventStore()
        self.check = bool(self.params["check"])
        self.inflight: dict[str, tuple[str, int, str]] = {}  # client -> (agg, version, op)
        self.log: list[tuple[str, int, int, str]] = []  # (aggregate, delta, version, msg_id)
        self.projection = KeyValueStore("projection:balance")

    def _invariant_min(self) -> int | None:
        return self.params["invariant"].get("min")

    def step(self, step: Step) -> Step | None:
        a, client, agg = step.action, step.actor or "", step.key or ""
        if a == Action.DEPOSIT and client not in self.inflight and agg:
            op_id = self.op(client, "deposit", agg, "1", "events")
            version = self.append(agg, 1, None)
            self.done(
                op_id,
                client,
                "deposit",
                agg,
                OpPhase.OK,
                value="1",
                version=version,
                store="events",
            )
            return Step(Action.DEPOSIT, client, agg, "1")
        if a == Action.VALIDATE and client not in self.inflight and agg:
            op_id = self.op(client, "withdraw", agg, "-1", "events")
            version = self.store.version(agg)
            if self.store.balance(agg) < 1:
                self.done(
                    op_id,
                    client,
                    "withdraw",
                    agg,
                    OpPhase.FAIL,
                    value="-1",
                    store="events",
                    error="insufficient balance",
                )
            else:
                self.inflight[client] = (agg, version, op_id)
            return Step(Action.VALIDATE, client, agg)
        if a == Action.APPEND and client in self.inflight:
            agg, read, op_id = self.inflight.pop(client)
            version = self.append(agg, -1, read if self.check else None)
            if version is None:
                self.done(
                    op_id,
                    client,
                    "withdraw",
                    agg,
                    OpPhase.FAIL,
                    value="-1",
                    store="events",
                    error=f"expected version {read}, found {self.store.version(agg)}",
                )
            else:
                self.done(
                    op_id,
                    client,
                    "withdraw",
                    agg,
                    OpPhase.OK,
                    value="-1",
                    version=version,
                    store="events",
                )
            return Step(Action.APPEND, client, agg, "-1")
        return None

    def append(self, agg: str, delta: int, expected: int | None) -> int | None:
        version = self.store.append(agg, delta, expected)
        if version is None:
            return None
        msg_id = f"e{self.store.position}"
        self.rec.emit(
            EventType.MSG,
            action=MsgAction.PRODUCE,
            channel=self.channel,
            partition=0,
            offset=self.store.position - 1,
            msg_id=msg_id,
            key=agg,
            value=str(delta),
            version=version,
        )
        self.tally.produce(self.channel, msg_id)
        self.tally.event(agg, delta)
        self.log.append((agg, delta, version, msg_id))
        return version

    def finish(self) -> list[Step]:
        return [s for c in sorted(self.inflight) if (s := self.step(Step(Action.APPEND, c)))]

    def drain(self) -> None:
        """The projection folds the whole log, in order, into balances."""
        store = self.projection.name
        for offset, (agg, delta, version, msg_id) in enumerate(self.log):
            common = dict(
                consumer="projection",
                process="projection#1",
                channel=self.channel,
                partition=0,
                offset=offset,
                msg_id=msg_id,
                key=agg,
                version=version,
            )
            self.rec.emit(
                EventType.MSG, action=MsgAction.DELIVER, value=str(delta), attempt=1, **common
            )
            self.tally.deliver("projection", "projection#1", msg_id, agg, version)
            total = int(self.projection.rows.get(agg, ("0", None))[0]) + delta
            self.projection.put(agg, str(total), version)
            self.rec.emit(
                EventType.MSG, action=MsgAction.APPLY, store=store, value=str(total), **common
            )
        self.mark(Mark.CONSUMER_DONE, consumer="projection", channel=self.channel)
        self.tally.done("projection", self.channel)

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        return None, {self.projection.name: {k: v for k, (v, _) in self.projection.rows.items()}}


@dataclass(frozen=True, slots=True)
class SetupSpec:
    """A simulated setup: how to build it and which steps its schedules hold."""

    name: str
    summary: str
    claims: tuple[str, ...]
    make: Callable[[], Sim]
    moves: tuple[Move, ...]
    params: dict[str, Any] = field(default_factory=dict)

    def run(self, steps: Iterable[Step]) -> SimResult:
        """Run a schedule on a fresh instance of the setup."""
        return self.make().run(steps)


def _spec(
    name: str,
    summary: str,
    claims: tuple[str, ...],
    cls: type[Sim],
    moves: tuple[Move, ...],
    **params: Any,
) -> SetupSpec:
    def make() -> Sim:
        return cls(params, name)

    return SetupSpec(name, summary, claims, make, moves, params)


def _cdc_moves(partitions: int, store: str) -> tuple[Move, ...]:
    return (
        Move(Action.DB_WRITE, CLIENTS[:2], KEYS),
        Move(Action.POLL, ("g",), partitions=tuple(range(partitions))),
        Move(Action.APPLY, ("g",)),
        Move(Action.COMMIT, ("g",)),
        Move(Action.CRASH, ("g",)),
        Move(Action.RESTART, ("g",)),
        Move(Action.PARTITION, targets=(f"g->{store}",)),
        Move(Action.HEAL),
    )


SETUPS: dict[str, SetupSpec] = {
    s.name: s
    for s in (
        _spec(
            "dual-write",
            "clients write the db, then the cache, concurrently on hot keys",
            ("C1",),
            DualWriteSim,
            (Move(Action.DB_WRITE, CLIENTS, KEYS), Move(Action.CACHE_WRITE, CLIENTS)),
        ),
        _spec(
            "dual-write-crash",
            "dual write whose clients may crash between the db and the cache write",
            ("C2",),
            DualWriteSim,
            (
                Move(Action.DB_WRITE, CLIENTS[:2], KEYS),
                Move(Action.CACHE_WRITE, CLIENTS[:2]),
                Move(Action.CRASH, CLIENTS[:2]),
            ),
        ),
        _spec(
            "cdc",
            "db change log -> 2-partition log -> consumer that commits after an "
            "idempotent, version-checked apply",
            ("C3", "C8", "C15"),
            CdcSim,
            _cdc_moves(2, "cache"),
            partitions=2,
            policy="after-apply",
        ),
        _spec(
            "cdc-commit-before",
            "cdc whose consumer commits offsets before applying (a planted bug)",
            ("C4",),
            CdcSim,
            _cdc_moves(2, "cache"),
            partitions=2,
            policy="before-apply",
        ),
        _spec(
            "cdc-counter",
            "cdc whose consumer adds one to a counter per message "
            "(not idempotent), committing after apply",
            ("C5",),
            CdcSim,
            _cdc_moves(1, "counter"),
            partitions=1,
            policy="after-apply",
            effect="counter",
        ),
        _spec(
            "outbox",
            "the db row and an outbox row in one transaction, CDC on the outbox "
            "-> log -> idempotent consumer",
            ("C14",),
            CdcSim,
            _cdc_moves(2, "cache"),
            partitions=2,
            policy="after-apply",
            channel="outbox",
        ),
        _spec(
            "amqp",
            "db commits on a hot key -> AMQP queue -> two competing workers (prefetch 1) that "
            "overwrite the cache",
            ("C7",),
            AmqpSim,
            (
                Move(Action.DB_WRITE, CLIENTS[:2], KEYS[:1]),
                Move(Action.POLL, ("w1", "w2")),
                Move(Action.APPLY, ("w1", "w2")),
                Move(Action.CRASH, ("w1", "w2")),
                Move(Action.RESTART, ("w1", "w2")),
            ),
            workers=2,
        ),
        _spec(
            "bounded-log",
            "a log keeping the last 3 records; consumer `fast` keeps up, "
            "`slow` polls when the schedule says",
            ("C6",),
            BoundedLogSim,
            (Move(Action.DB_WRITE, CLIENTS[:2], KEYS), Move(Action.POLL, ("slow",))),
            retention=3,
        ),
        _spec(
            "compacted-log",
            "a compacted log the broker may compact at any step; at quiesce a new "
            "consumer rebuilds a store from offset 0",
            ("C9",),
            CompactedLogSim,
            (Move(Action.DB_WRITE, CLIENTS[:2], KEYS), Move(Action.COMPACT)),
        ),
        _spec(
            "event-sourced",
            "withdrawals validated against the replayed balance, "
            "appended without an expected version",
            ("C12",),
            EventSourcedSim,
            (
                Move(Action.DEPOSIT, CLIENTS[:2], ("a1",)),
                Move(Action.VALIDATE, CLIENTS[:2], ("a1",)),
                Move(Action.APPEND, CLIENTS[:2]),
            ),
            check=False,
        ),
        _spec(
            "event-sourced-checked",
            "the same commands, appended with the expected version their validation read",
            ("C11", "C12"),
            EventSourcedSim,
            (
                Move(Action.DEPOSIT, CLIENTS[:2], ("a1",)),
                Move(Action.VALIDATE, CLIENTS[:2], ("a1",)),
                Move(Action.APPEND, CLIENTS[:2]),
            ),
            check=True,
        ),
    )
}


def get_setup(name: str) -> SetupSpec:
    """The setup of that name, or a ValueError listing the known ones."""
    try:
        return SETUPS[name]
    except KeyError:
        raise ValueError(f"unknown setup {name!r}: choose one of {', '.join(SETUPS)}") from None
