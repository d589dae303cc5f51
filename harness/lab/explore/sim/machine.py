"""The simulator's machinery shared by every setup: driving, quiescing, recording."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from driftlab.harness.history.events import MsgFields
from driftlab.harness.history.schema import (
    SOURCE_STORE,
    Event,
    FaultPhase,
    Mark,
    MsgAction,
    OpPhase,
)
from driftlab.harness.lab.explore.schedule import Action, Step
from driftlab.harness.lab.explore.sim.database import Database
from driftlab.harness.lab.explore.sim.kv import KeyValueStore
from driftlab.harness.lab.explore.sim.log import LogBroker, Record
from driftlab.harness.lab.explore.sim.queue import Message
from driftlab.harness.lab.explore.sim.recorder import SimRecorder
from driftlab.harness.lab.explore.sim.tally import Finding, Tally


def handling(
    consumer: str, process: str, channel: str, m: Record | Message, partition: int | None = None
) -> MsgFields:
    """The history fields of `process` (of group `consumer`) handling message `m`."""
    return {
        "consumer": consumer,
        "process": process,
        "channel": channel,
        "partition": partition,
        "offset": m.offset if isinstance(m, Record) else None,
        "msg_id": m.msg_id,
        "key": m.key,
        "value": m.value,
        "version": m.version,
    }


@dataclass(slots=True)
class SimResult:
    """What one schedule did: the steps that ran, the history, the tallied findings."""

    executed: list[Step]
    events: list[Event]
    findings: set[Finding]


class Sim(ABC):
    """One run of a setup: the recorder, the tally, clients' values, cut links."""

    name: str = ""

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        self.name = name or self.name
        self.params = dict(params or {})
        self.rec = SimRecorder()
        self.tally = Tally(invariant_min=self.invariant_min())
        self.rec.header(self.name, self.params)
        self._writes: dict[str, int] = {}
        self._ops = 0
        self._faults = 0
        self.cut: dict[str, str] = {}  # link -> fault_id

    def invariant_min(self) -> int | None:
        """The lower bound the event-sourcing invariant sets, if any."""
        return None

    # -- driving ---------------------------------------------------------------------
    @abstractmethod
    def step(self, step: Step) -> Step | None:
        """Run one step if enabled; return it as executed (values filled) or None."""

    def finish(self) -> list[Step]:
        """Clients complete their operations in flight, as explicit steps."""
        return []

    @abstractmethod
    def drain(self) -> None:
        """Consumers read and apply everything left; mark each consumer done."""

    @abstractmethod
    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        """The source's rows (None when there is no source) and each derived store's."""

    def final_versions(self) -> dict[str, int]:
        """The source's version of every key, for its state events."""
        return {}

    def run(self, steps: Iterable[Step]) -> SimResult:
        """Run a schedule to its end, then quiesce; return what happened."""
        executed = [done for s in steps if (done := self.step(s)) is not None]
        executed += self.finish()
        executed.append(Step(Action.QUIESCE))
        self.quiesce()
        return SimResult(executed, self.rec.events, self.tally.findings)

    def quiesce(self) -> None:
        """Heal, drain, then record the final state of every store."""
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
                self.rec.state(store, None, None)
            for key in sorted(rows):
                version = versions.get(key) if store == SOURCE_STORE else None
                self.rec.state(store, key, rows[key], version=version)
        self.tally.final(source or {}, derived if source is not None else {})
        self.mark(Mark.END)

    # -- recording ---------------------------------------------------------------------
    def mark(self, kind: str, **fields: Any) -> None:
        """Record a named point of the run."""
        self.rec.mark(kind, **fields)

    def fresh_value(self, client: str) -> str:
        """A value unique across the run, as driftlab.harness.history.values makes them."""
        n = self._writes.get(client, 0) + 1
        self._writes[client] = n
        return f"{client}-{n}"

    def op(self, client: str, f: str, key: str, value: str | None, store: str) -> str:
        """Record an invoke; return the op id for its completion."""
        self._ops += 1
        op_id = f"op{self._ops}"
        self.rec.op(client, OpPhase.INVOKE, f, key=key, value=value, store=store, op_id=op_id)
        return op_id

    def done(self, op_id: str, client: str, f: str, key: str, phase: str, **fields: Any) -> None:
        """Record the completion of an op."""
        self.rec.op(client, phase, f, key=key, op_id=op_id, **fields)

    def fault(self, phase: str, kind: str, target: str, fault_id: str | None = None) -> str:
        """Record a fault window's start (a new id) or stop (the start's id)."""
        if fault_id is None:
            self._faults += 1
            fault_id = f"f{self._faults}"
        self.rec.fault(phase, kind, target=target, fault_id=fault_id)
        return fault_id

    def partition(self, link: str) -> Step | None:
        """Cut a link (enabled if it is whole)."""
        if link in self.cut:
            return None
        self.cut[link] = self.fault(FaultPhase.START, "partition", link)
        return Step(Action.PARTITION, target=link)

    def heal(self) -> Step | None:
        """Restore every cut link (enabled if one is cut)."""
        if not self.cut:
            return None
        for link, fault_id in sorted(self.cut.items()):
            self.fault(FaultPhase.STOP, "partition", link, fault_id)
        self.cut.clear()
        return Step(Action.HEAL)


class DbSim(Sim):
    """A setup whose source is a database, its changes captured onto `channel`."""

    channel = "cdc"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.db = Database()

    def write_source(self, client: str, key: str, increment: bool = False) -> tuple[str, int, int]:
        """Commit a client's write (or increment) to the database, recording the op.

        Returns the value written, the key's new version and the commit's LSN.
        """
        if increment:
            op_id = self.op(client, "increment", key, None, SOURCE_STORE)
            value, version, lsn = self.db.increment(key)
        else:
            value = self.fresh_value(client)
            op_id = self.op(client, "write", key, value, SOURCE_STORE)
            version, lsn = self.db.write(key, value)
        f = "increment" if increment else "write"
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
        return value, version, lsn

    def delete_source(self, client: str, key: str) -> tuple[int, int] | None:
        """Commit a client's delete of a present key; return its version and LSN."""
        if key not in self.db.rows:
            return None
        op_id = self.op(client, "delete", key, None, SOURCE_STORE)
        deleted = self.db.delete(key)
        assert deleted is not None
        version, lsn = deleted
        self.done(
            op_id,
            client,
            "delete",
            key,
            OpPhase.OK,
            version=version,
            store=SOURCE_STORE,
            source_pos=lsn,
        )
        self.tally.source_write(key, None)
        return version, lsn

    def delete(self, client: str, key: str, log: LogBroker) -> Step | None:
        """A client deletes a present key; the connector captures a tombstone."""
        deleted = self.delete_source(client, key)
        if deleted is None:
            return None
        version, lsn = deleted
        self.capture(log, key, None, version, lsn)
        return Step(Action.DB_DELETE, client, key)

    def produced(
        self,
        msg_id: str,
        key: str,
        value: str | None,
        version: int,
        lsn: int,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        """Record the broker's acknowledgement of a captured change."""
        self.rec.msg(
            MsgAction.PRODUCE,
            channel=self.channel,
            partition=partition,
            offset=offset,
            msg_id=msg_id,
            key=key,
            value=value,
            version=version,
            source_pos=lsn,
        )
        self.tally.produce(self.channel, msg_id)

    def capture(self, log: LogBroker, key: str, value: str | None, version: int, lsn: int) -> None:
        """The connector appends a commit to the log in commit order (Debezium, WAL)."""
        partition = log.partition_for(key)
        msg_id = f"m{lsn}"
        rec = log.partitions[partition].append(key, value, version, msg_id)
        self.produced(msg_id, key, value, version, lsn, partition, rec.offset)

    def delivered(
        self, group: str, process: str, partition: int, rec: Record, attempt: int
    ) -> Step:
        """Record a log record reaching a consumer process; return the poll step."""
        fields = handling(group, process, self.channel, rec, partition)
        self.rec.msg(MsgAction.DELIVER, **fields, attempt=attempt)
        self.tally.deliver(group, process, rec.msg_id, rec.key, rec.version)
        return Step(Action.POLL, group, rec.key, rec.value, partition, rec.offset)

    def apply_newer(
        self, store: KeyValueStore, group: str, process: str, partition: int, rec: Record
    ) -> Step:
        """Idempotent, version-checked apply: a newer version is applied, else skipped."""
        applied = store.put_if_newer(rec.key, rec.value, rec.version)
        fields = handling(group, process, self.channel, rec, partition)
        self.rec.msg(MsgAction.APPLY if applied else MsgAction.SKIP, **fields, store=store.name)
        if applied:
            self.tally.effect(store.name, rec.key, rec.value, rec.version, rec.msg_id)
        else:
            self.tally.skip(store.name, rec.key, rec.value)
        return Step(Action.APPLY, group, rec.key, rec.value, partition, rec.offset)

    def source_rows(self) -> dict[str, str]:
        """The database's final rows."""
        return {k: v for k, (v, _) in self.db.rows.items()}

    def final_versions(self) -> dict[str, int]:
        return {k: ver for k, (_, ver) in self.db.rows.items()}
