"""The op-by-op mapping of docs/jepsen.md: client ops, their sends and polls, and the
consumer and producer instances they belong to."""

from __future__ import annotations

import time as _time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.schema import Mark
from driftlab.harness.lab.importers.jepsen.nemesis import Nemesis
from driftlab.harness.lab.importers.jepsen.reading import JepsenImportError
from driftlab.harness.lab.importers.jepsen.values import (
    index_extra,
    op_f,
    send_parts,
    sends_in,
    text,
)

CONSUMER = "jepsen"
"""The one logical consumer every Jepsen process polls for: a message is lost when no
process ever read it, as Jepsen's :unseen and :lost-write judge it."""
KNOWN_FS = frozenset({"send", "poll", "txn", "assign", "subscribe", "crash"})
"""The :f of a Jepsen kafka client op; any other is counted as not read."""
OK_POLL_WITHOUT_READS = ":ok poll without its reads"
"""What an `:ok` poll whose [:poll] carries no read map is called in the warnings."""


@dataclass(slots=True)
class _Sends:
    """The sends of one invoked op, watched until we know whether they took effect."""

    pairs: list[tuple[str, str]]
    proven: bool = False  # some ok poll read one of them


@dataclass(frozen=True, slots=True)
class _Message:
    """One message of Jepsen key `key` as it is sent or polled."""

    key: str
    value: str
    offset: int | None
    process: str  # the producer or consumer instance
    time: int
    extra: dict[str, Any] | None


@dataclass(slots=True)
class _Process:
    """One Jepsen process: its op in flight and where its consumer stands per key."""

    op_id: str | None = None
    sends: _Sends | None = None
    epochs: dict[str, int] = field(default_factory=dict)  # per key: assignments lost
    read: set[str] = field(default_factory=set)  # keys polled since their last reset
    sent: set[str] = field(default_factory=set)  # keys sent to since their last reset


class Converter:
    """The op-by-op mapping of docs/jepsen.md, recording as it reads."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.base = _time.time_ns()
        self.ops = 0
        self.events = 0
        self.sends = 0
        self.polled = 0
        self.subscribe = False
        self.last_time = 0
        self.procs: dict[str, _Process] = {}
        self.channels: set[str] = set()
        self.watch: dict[tuple[str, str], _Sends] = {}
        self.deferred: list[tuple[_Sends, list[_Message]]] = []
        self.nemesis = Nemesis(self._mark, self._fault)
        self.unread: dict[str, list[Any]] = {}
        """what could not be read -> [how many ops, the first one's index]"""
        self.final_polls = 0
        self.final_unread = 0
        """:ok polls since the last send completed, and those without their reads"""

    # --- ops -------------------------------------------------------------------------

    def convert(self, ops: Iterable[dict[str, Any]]) -> None:
        """Record every op of the history."""
        for op in ops:
            self.ops += 1
            typ = text(op.get("type"))
            proc = text(op.get("process"))
            if typ not in ("invoke", "ok", "fail", "info") or proc is None:
                raise JepsenImportError(
                    f"op #{self.ops} (index {op.get('index')}) has type {typ!r} and process "
                    f"{proc!r}; a Jepsen op has :type :invoke/:ok/:fail/:info and a :process"
                )
            t = self._time(op)
            if proc == "nemesis":
                self.nemesis.record(op, t)
            elif typ == "invoke":
                self._invoke(proc, op, t)
            else:
                self._complete(proc, op, typ, t)

    def _time(self, op: dict[str, Any]) -> int:
        """Jepsen's :time (ns since the test began), else its :index, else the op's
        position; never before the previous op (Jepsen's history is in time order)."""
        raw = op.get("time", op.get("index", self.ops))
        t = raw if type(raw) is int else self.ops
        # driftlab times are ns since the epoch: the test begins when the import began,
        # after the header the recorder stamped with the clock.
        t = max(t + self.base, self.last_time)
        self.last_time = t
        return t

    def _invoke(self, proc: str, op: dict[str, Any], t: int) -> None:
        p = self.procs.setdefault(proc, _Process())
        f = op_f(op)
        p.op_id = f"jepsen-{proc}-{op.get('index', self.ops)}"
        self._op(proc, "invoke", f, op_id=p.op_id, time=t, extra=index_extra(op))
        pairs = [(k, v) for k, v, _ in sends_in(op.get("value"))]
        if pairs:
            p.sends = _Sends(pairs)
            for pair in pairs:
                self.watch[pair] = p.sends

    def _complete(self, proc: str, op: dict[str, Any], typ: str, t: int) -> None:
        p = self.procs.setdefault(proc, _Process())
        f = op_f(op)
        op_id = p.op_id or f"jepsen-{proc}-{op.get('index', self.ops)}"
        error = op.get("error")
        self._op(
            proc,
            typ,
            f,
            op_id=op_id,
            time=t,
            error=None if error is None else text(error),
            extra=index_extra(op),
        )
        sends, p.sends, p.op_id = p.sends, None, None
        if f not in KNOWN_FS:
            self._not_read(f"op with unknown :f :{f}", op)
        if sends is not None and typ != "fail":
            # The final reads are the polls after the last send: a send resets them.
            self.final_polls = self.final_unread = 0
        if f in ("assign", "subscribe"):
            self.subscribe |= f == "subscribe"
            if typ != "fail":
                self._reassign(p, {text(k) for k in op.get("value") or ()})
        elif f in ("send", "poll", "txn"):
            self._mops(proc, p, op, typ, t, sends)
        elif sends is not None:
            self._unwatch(sends)

    def _reassign(self, p: _Process, keys: set[str]) -> None:
        """An assign or subscribe that drops a key ends the consumer's position on it
        and the producer's last send to it: its next poll of that key, or send, starts
        a new instance (Jepsen forgets its last read and its last send)."""
        for k in (p.read | p.sent) - keys:
            p.epochs[k] = p.epochs.get(k, 0) + 1
        p.read &= keys
        p.sent &= keys

    def _mops(
        self, proc: str, p: _Process, op: dict[str, Any], typ: str, t: int, sends: _Sends | None
    ) -> None:
        index = op.get("index")
        extra = index_extra(op)
        produced: list[_Message] = []
        committed: dict[str, int] = {}
        for mop in op.get("value") or ():
            if not isinstance(mop, list) or not mop:
                continue
            name = text(mop[0])
            if name == "send" and len(mop) >= 3:
                k, v, offset = send_parts(mop)
                if typ == "ok" or (typ == "info" and offset is not None):
                    produced.append(_Message(k, v, offset, self._producer(proc, p, k), t, extra))
            elif (
                name == "poll" and typ == "ok" and not (len(mop) >= 2 and isinstance(mop[1], dict))
            ):
                # Never valid in Jepsen's format: taken as empty, it would read as loss.
                self._not_read(OK_POLL_WITHOUT_READS, op)
                self.final_polls += 1
                self.final_unread += 1
            elif name == "poll" and len(mop) >= 2 and isinstance(mop[1], dict):
                self.final_polls += typ == "ok"
                for raw_key, pairs in mop[1].items():
                    k = text(raw_key)
                    instance = self._instance(proc, p, k, typ, index)
                    for pair in pairs or ():
                        self._deliver(k, pair, instance, typ, t, extra, committed)
        if typ == "ok":
            for e in produced:
                self._produce(e)
            for k, top in committed.items():
                self._msg(
                    "commit",
                    channel=k,
                    partition=0,
                    offset=top + 1,
                    consumer=CONSUMER,
                    process=self._instance(proc, p, k, typ, index),
                    time=t,
                    extra=extra,
                )
        elif typ == "info" and produced and sends is not None:
            # A crashed op's sends count once one of them was read (Jepsen's
            # must-have-committed?); that may only show later in the history.
            if sends.proven:
                for e in produced:
                    self._produce(e)
            else:
                self.deferred.append((sends, produced))
                return
        if sends is not None:
            self._unwatch(sends)

    def _instance(self, proc: str, p: _Process, k: str, typ: str, index: Any) -> str:
        """The consumer instance (driftlab `process`) a poll of key k belongs to."""
        if typ != "ok":
            # An aborted or crashed poll does not move the consumer: judged on its own.
            return f"{proc}/aborted-{index}"
        p.read.add(k)
        epoch = p.epochs.get(k, 0)
        return proc if not epoch else f"{proc}/{epoch}"

    def _producer(self, proc: str, p: _Process, k: str) -> str:
        """The producer instance (driftlab `process` of a produce) of a send to key k:
        its sends are compared with its earlier ones until a reassignment drops k."""
        p.sent.add(k)
        epoch = p.epochs.get(k, 0)
        return proc if not epoch else f"{proc}/{epoch}"

    def _deliver(
        self,
        k: str,
        pair: Any,
        instance: str,
        typ: str,
        t: int,
        extra: dict[str, Any] | None,
        committed: dict[str, int],
    ) -> None:
        if not isinstance(pair, list) or len(pair) != 2:
            raise JepsenImportError(
                f"op #{self.ops}: a poll of {k} holds {pair!r}, not [offset value]"
            )
        raw_offset, raw_value = pair
        offset = raw_offset if type(raw_offset) is int else None
        v = text(raw_value)
        self.polled += 1
        if typ == "ok":
            sends = self.watch.get((k, v))
            if sends is not None:
                sends.proven = True
            if offset is not None and offset > committed.get(k, -1):
                committed[k] = offset
        self._message("deliver", _Message(k, v, offset, instance, t, extra), consumer=CONSUMER)

    def _produce(self, m: _Message) -> None:
        self.sends += 1
        self._message("produce", m)

    def _message(self, action: str, m: _Message, consumer: str | None = None) -> None:
        """The msg event: a channel per Jepsen key, one partition, the id `key/value`
        (Jepsen's values are unique per key)."""
        self.channels.add(m.key)
        self._msg(
            action,
            channel=m.key,
            partition=0,
            offset=m.offset,
            msg_id=f"{m.key}/{m.value}",
            key=m.key,
            value=m.value,
            consumer=consumer,
            process=m.process,
            time=m.time,
            extra=m.extra,
        )

    def _unwatch(self, sends: _Sends) -> None:
        for pair in sends.pairs:
            if self.watch.get(pair) is sends:
                del self.watch[pair]

    def _not_read(self, what: str, op: dict[str, Any]) -> None:
        seen = self.unread.setdefault(what, [0, op.get("index", self.ops)])
        seen[0] += 1

    def warnings(self) -> list[str]:
        """One line per kind of op that could not be read: how many, the first's index."""
        return [
            f"{n:,} op(s) not read, {what} (the first at index {first})"
            for what, (n, first) in sorted(self.unread.items())
        ]

    def unreadable(self) -> list[str]:
        """Why the history cannot be judged for loss: its final polls (the `:ok` polls
        after the last send) carry no reads, so what they read is unknown."""
        if not self.final_unread:
            return []
        return [
            f"{self.final_unread:,} of the {self.final_polls:,} final poll(s) (the :ok polls "
            "after the last send) carry no reads: what the consumer read by the end is "
            "unknown, so a lost message cannot be told from a read one"
        ]

    # --- the end ---------------------------------------------------------------------

    def finish(self) -> None:
        """Deferred sends, then the marks that close the history: every channel is done
        (what no consumer read by the end of a Jepsen test it never will) and the end."""
        for sends, produced in self.deferred:
            if sends.proven:
                for e in produced:
                    self._produce(e)
        t = self.last_time
        for channel in sorted(self.channels):
            self._mark(Mark.CONSUMER_DONE, t, consumer=CONSUMER, channel=channel)
        self._mark(Mark.END, t)

    # --- recording -------------------------------------------------------------------

    def _op(self, process: str, phase: str, f: str, **cols: Any) -> None:
        self.events += 1
        self.rec.op(process, phase, f, **cols)

    def _msg(self, action: str, **cols: Any) -> None:
        self.events += 1
        self.rec.msg(action, **cols)

    def _mark(self, kind: str, t: int, **cols: Any) -> None:
        self.events += 1
        self.rec.mark(kind, time=t, **cols)

    def _fault(self, phase: str, kind: str, t: int, **cols: Any) -> None:
        self.events += 1
        self.rec.fault(phase, kind, time=t, **cols)
