"""The simulated setups, each a small machine driven one step at a time by a schedule.

Every setup records the same history a real run of it records (op, msg, fault, mark and
state events of harness.history.schema) and tallies the cheap anomaly kinds as it goes.
A step that is not enabled in the current state is skipped: `step` returns None.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.explore.schedule import Action, Step
from harness.explore.sim.consumer import CommitPolicy, LogConsumer
from harness.explore.sim.eventstore import EventStore
from harness.explore.sim.kv import KeyValueStore
from harness.explore.sim.log import LogBroker
from harness.explore.sim.machine import DbSim, Sim, SimResult
from harness.explore.sim.queue import Message, Queue
from harness.history.schema import FaultPhase, Mark, MsgAction, OpPhase

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


class DualWriteSim(DbSim):
    """C1/C2: each client writes the database, then the same value to the cache.

    A client crash step between the two writes (C2) abandons the cache write.
    """

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.cache = KeyValueStore("cache")
        self.inflight: dict[str, tuple[str, str, int]] = {}

    def step(self, step: Step) -> Step | None:
        client = step.actor or ""
        if step.action == Action.DB_WRITE and client not in self.inflight and step.key:
            value, version, _ = self.write_source(client, step.key)
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
        return self.source_rows(), {"cache": self.cache.values()}


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
        self.rec.msg(
            MsgAction.APPLY,
            consumer="g",
            process=self.consumer.process,
            channel=self.channel,
            partition=partition,
            offset=rec.offset,
            msg_id=rec.msg_id,
            key=rec.key,
            version=rec.version,
            store=self.store.name,
            value=value,
        )
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


class AmqpSim(DbSim):
    """C7: commits go to an AMQP queue; competing workers (prefetch 1) overwrite the cache."""

    channel = "updates"
    group = "workers"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.queue = Queue()
        self.cache = KeyValueStore("cache")
        self.workers = [f"w{i + 1}" for i in range(self.params.get("workers", 2))]
        self.up = dict.fromkeys(self.workers, True)
        self.instance = dict.fromkeys(self.workers, 1)
        self.holding: dict[str, tuple[Message, int]] = {}
        self.crash_ids: dict[str, str] = {}

    def process(self, worker: str) -> str:
        return f"{worker}#{self.instance[worker]}"

    def step(self, step: Step) -> Step | None:
        a, w = step.action, step.actor or ""
        if a == Action.DB_WRITE and step.key and w:
            value, version, lsn = self.write_source(w, step.key)
            self.queue.publish(Message(f"m{lsn}", step.key, value, version))
            self.produced(f"m{lsn}", step.key, value, version, lsn)
            return Step(Action.DB_WRITE, w, step.key, value)
        if w not in self.up:
            return None
        if a == Action.POLL and self.up[w] and w not in self.holding:
            return self.take(w)
        if a == Action.APPLY and self.up[w] and w in self.holding:
            return self.apply(w)
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

    def take(self, w: str) -> Step | None:
        got = self.queue.take()
        if got is None:
            return None
        msg, attempt = got
        self.holding[w] = (msg, attempt)
        self.rec.msg(
            MsgAction.DELIVER,
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

    def apply(self, w: str) -> Step:
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
        self.rec.msg(MsgAction.APPLY, store="cache", **common)
        self.tally.effect("cache", msg.key, msg.value, msg.version, msg.msg_id)
        self.rec.msg(MsgAction.ACK, attempt=attempt, **common)
        return Step(Action.APPLY, w, msg.key, msg.value)

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
        return self.source_rows(), {"cache": self.cache.values()}


class BoundedLogSim(DbSim):
    """C6: a one-partition log keeping `retention` records; `fast` keeps up, `slow` polls."""

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.log = LogBroker.create(1, retention=self.params.get("retention", 3))
        self.consumers = {g: LogConsumer(g, 1) for g in ("fast", "slow")}

    def step(self, step: Step) -> Step | None:
        if step.action == Action.DB_WRITE and step.actor and step.key:
            value, version, lsn = self.write_source(step.actor, step.key)
            self.capture(self.log, step.key, value, version, lsn)
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
        return self.delivered(group, consumer.process, 0, rec, attempt)

    def drain(self) -> None:
        for group in self.consumers:
            while self.poll(group) is not None:
                pass
            self.mark(Mark.CONSUMER_DONE, consumer=group, channel=self.channel)
            self.tally.done(group, self.channel)

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        return self.source_rows(), {}


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


class EventSourcedSim(Sim):
    """C11/C12: commands validated against a replayed aggregate, events appended.

    With `check`, an append carries the version its validation read (optimistic
    concurrency) and fails if another event landed in between.
    """

    channel = "events"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        params = {"invariant": {"min": 0}, "check": False, **(params or {})}
        super().__init__(params, name)
        self.store = EventStore()
        self.check = bool(self.params["check"])
        self.inflight: dict[str, tuple[str, int, str]] = {}  # client -> (agg, version, op)
        self.log: list[tuple[str, int, int, str]] = []  # (aggregate, delta, version, msg_id)
        self.projection = KeyValueStore("projection:balance")

    def invariant_min(self) -> int | None:
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
                self.inflight[client] = (agg, self.store.version(agg), op_id)
            return Step(Action.VALIDATE, client, agg)
        if a == Action.APPEND and client in self.inflight:
            agg, read, op_id = self.inflight.pop(client)
            version = self.append(agg, -1, read if self.check else None)
            if version is None:
                found = self.store.version(agg)
                self.done(
                    op_id,
                    client,
                    "withdraw",
                    agg,
                    OpPhase.FAIL,
                    value="-1",
                    store="events",
                    error=f"expected version {read}, found {found}",
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
        self.rec.msg(
            MsgAction.PRODUCE,
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
            self.rec.msg(MsgAction.DELIVER, value=str(delta), attempt=1, **common)
            self.tally.deliver("projection", "projection#1", msg_id, agg, version)
            total = str(int(self.projection.rows.get(agg, ("0", None))[0]) + delta)
            self.projection.put(agg, total, version)
            self.rec.msg(MsgAction.APPLY, store=store, value=total, **common)
            self.tally.effect(store, agg, total, version, msg_id)
        self.mark(Mark.CONSUMER_DONE, consumer="projection", channel=self.channel)
        self.tally.done("projection", self.channel)

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        return None, {self.projection.name: self.projection.values()}


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
            (
                Move(Action.DB_WRITE, CLIENTS[:2], KEYS),
                Move(Action.COMPACT),
                Move(Action.DB_DELETE, CLIENTS[:2], KEYS),
            ),
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
