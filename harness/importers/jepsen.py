"""Jepsen kafka-workload histories as driftlab run folders.

`import_history(path, run_dir)` streams a history written by Jepsen's kafka workload
(`jepsen.tests.kafka`, also used by Maelstrom's kafka workload) and records it in
driftlab's history schema (docs/history.md) as one segment of `run_dir`, with a
config.json whose expectations forbid the kinds that are errors in Jepsen's checker. The
mapping, op by op, and how each driftlab kind relates to Jepsen's anomaly names are in
docs/jepsen.md; `JEPSEN_NAMES` is that table for the report.

Input is `history.edn` (one op per line as Jepsen's store writes it, `#jepsen.history.Op`
records included, or one vector of ops) or JSON as elle-cli and Maelstrom tooling write
it (an array with one op per line, or JSON lines). The file is read in chunks: memory
holds the operations in flight and the keys, never the history.
"""

from __future__ import annotations

import os
import time as _time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import orjson

from harness.history.recorder import Recorder
from harness.history.schema import Event, EventType, FaultPhase, Mark, RunHeader
from harness.importers import edn
from harness.rundir import RunDir

CONSUMER = "jepsen"
"""The one logical consumer every Jepsen process polls for: a message is lost when no
process ever read it, as Jepsen's :unseen and :lost-write judge it."""

SCENARIO = "jepsen"
FORMATS = ("edn", "json")

JEPSEN_NAMES: dict[str, str] = {
    "lost-message": ":lost-write, :unseen",
    "poll-skip": ":poll-skip, :int-poll-skip",
    "nonmonotonic-poll": ":nonmonotonic-poll, :int-nonmonotonic-poll",
    "inconsistent-offset": ":inconsistent-offsets",
    "duplicate-offset": ":duplicate",
    "nonmonotonic-send": ":nonmonotonic-send, :int-nonmonotonic-send",
    "duplicate-delivery": "(none: redelivery is allowed)",
    "realtime-lag": ":worst-realtime-lag",
}
"""Beside each driftlab kind an imported history can show, Jepsen's names for the same
anomaly, and for the realtime lag figure (docs/jepsen.md says where they differ)."""

FORBIDDEN = (
    "lost-message",
    "inconsistent-offset",
    "nonmonotonic-poll",
    "poll-skip",
    "duplicate-offset",
    "nonmonotonic-send",
)
"""Kinds whose Jepsen counterparts make Jepsen's checker fail. With `:subscribe` ops the
consumer may be rebalanced, and Jepsen allows poll skips and nonmonotonic polls."""
REBALANCE_ALLOWED = ("nonmonotonic-poll", "poll-skip")

# Jepsen nemesis functions that open or close a fault window, besides start-X / stop-X.
_NEMESIS_PAIRS = {
    "kill": (FaultPhase.START, "kill"),
    "start": (FaultPhase.STOP, "kill"),
    "pause": (FaultPhase.START, "pause"),
    "resume": (FaultPhase.STOP, "pause"),
}


class JepsenImportError(ValueError):
    """A history that cannot be imported; the message names the op and the fix."""


@dataclass(slots=True)
class ImportSummary:
    """What an import read and wrote."""

    source: str
    format: str
    ops: int = 0
    events: int = 0
    sends: int = 0
    polled: int = 0
    keys: int = 0
    processes: int = 0
    subscribe: bool = False
    started_ns: int = 0
    seconds: float = 0.0
    expectations: dict[str, str] = field(default_factory=dict)


def detect_format(path: Path) -> str:
    """`edn` or `json`, from the file name (history.edn, history.json, *.jsonl)."""
    suffix = path.suffix.lower()
    if suffix == ".edn":
        return "edn"
    if suffix in (".json", ".jsonl"):
        return "json"
    raise JepsenImportError(
        f"{path}: cannot tell EDN from JSON by its name; name it *.edn or *.json"
    )


def read_ops(stream: TextIO, fmt: str) -> Iterator[dict[str, Any]]:
    """The operations of a history, one at a time, as maps with string keys (EDN
    keywords are `str` subclasses, so `op["type"] == "ok"` holds for both formats)."""
    forms = edn.read_forms(stream) if fmt == "edn" else _json_ops(stream)
    for n, op in enumerate(forms, 1):
        if not isinstance(op, dict):
            raise JepsenImportError(f"op #{n} is {type(op).__name__}, not a map: {op!r:.80}")
        yield op


def _json_ops(stream: TextIO) -> Iterator[Any]:
    """JSON ops: an array with one op per line (elle-cli), JSON lines, or ops spread
    over several lines; a whole array on one line is read whole."""
    buf = ""
    for line in stream:
        text = line.strip()
        if not buf and text.startswith("["):
            text = text[1:].lstrip()  # the array's opening bracket
        if not text:
            continue
        buf = f"{buf}\n{text}" if buf else text
        # The op alone, or the op followed by the array's closing bracket.
        for candidate in (buf.rstrip(","), buf.removesuffix("]").rstrip().rstrip(",")):
            try:
                value = orjson.loads(candidate)
            except orjson.JSONDecodeError:
                continue
            buf = ""
            yield value
            break
    rest = buf.strip().rstrip("]").strip()
    if rest:
        try:
            yield from orjson.loads(f"[{rest}]")
        except orjson.JSONDecodeError as e:
            raise JepsenImportError(f"the JSON history ends in an unreadable op: {e}") from None


def import_history(
    path: str | os.PathLike[str], run_dir: str | os.PathLike[str], fmt: str | None = None
) -> ImportSummary:
    """Record the Jepsen history at `path` as the history of `run_dir` (which gets
    `history/` and `config.json`); `fmt` is `edn` or `json`, by default from the name."""
    source = Path(path)
    run = Path(run_dir)
    fmt = fmt or detect_format(source)
    if fmt not in FORMATS:
        raise JepsenImportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    started = _time.perf_counter()
    summary = ImportSummary(source=str(source), format=fmt)
    header = RunHeader(
        run_id=f"{SCENARIO}-{source.stem}-{run.name}",
        scenario=SCENARIO,
        seed=0,
        params={"source": str(source), "format": fmt},
    )
    try:
        stream = source.open(encoding="utf-8")
    except OSError as e:
        raise JepsenImportError(f"{source}: {e.strerror}; pass a Jepsen history file") from None
    with stream, Recorder(run, header, role="jepsen", batch_size=8192, flush_interval=1.0) as rec:
        converter = _Converter(rec)
        try:
            converter.convert(read_ops(stream, fmt))
        except edn.EDNError as e:
            raise JepsenImportError(f"{source}: {e}") from None
        except UnicodeDecodeError as e:
            raise JepsenImportError(f"{source}: not UTF-8 text ({e.reason})") from None
        converter.finish()
        summary.started_ns = converter.base
        summary.ops = converter.ops
        summary.events = converter.events
        summary.sends = converter.sends
        summary.polled = converter.polled
        summary.keys = len(converter.channels)
        summary.processes = len(converter.procs)
        summary.subscribe = converter.subscribe
    summary.expectations = {
        kind: "absent"
        for kind in FORBIDDEN
        if not (summary.subscribe and kind in REBALANCE_ALLOWED)
    }
    summary.seconds = _time.perf_counter() - started
    _write_config(run, source, summary)
    return summary


def _write_config(run: Path, source: Path, summary: ImportSummary) -> None:
    started = datetime.fromtimestamp(summary.started_ns / 1e9, UTC)
    config = {
        "scenario": SCENARIO,
        "seed": 0,
        "started_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "expectations": summary.expectations,
        "params": {
            "summary": f"Jepsen kafka history {source.name}, imported (docs/jepsen.md)",
            "setup": "imported Jepsen kafka history",
            "import": asdict(summary),
        },
        "foreign_names": {"tool": "Jepsen", "kinds": JEPSEN_NAMES},
    }
    RunDir(run).write_config(config)


@dataclass(slots=True)
class _Sends:
    """The sends of one invoked op, watched until we know whether they took effect."""

    pairs: list[tuple[str, str]]
    proven: bool = False  # some ok poll read one of them


@dataclass(slots=True)
class _Process:
    """One Jepsen process: its op in flight and where its consumer stands per key."""

    op_id: str | None = None
    sends: _Sends | None = None
    epochs: dict[str, int] = field(default_factory=dict)  # per key: assignments lost
    read: set[str] = field(default_factory=set)  # keys polled since their last reset
    sent: set[str] = field(default_factory=set)  # keys sent to since their last reset


class _Converter:
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
        self.deferred: list[tuple[_Sends, list[dict[str, Any]]]] = []
        self.nemesis_pending: set[str] = set()
        self.faults: dict[str, tuple[str, str]] = {}  # open windows: kind -> (id, target)
        self.fault_ids = 0

    # --- ops -------------------------------------------------------------------------

    def convert(self, ops: Iterable[dict[str, Any]]) -> None:
        """Record every op of the history."""
        for op in ops:
            self.ops += 1
            typ = _text(op.get("type"))
            proc = _text(op.get("process"))
            if typ not in ("invoke", "ok", "fail", "info") or proc is None:
                raise JepsenImportError(
                    f"op #{self.ops} (index {op.get('index')}) has type {typ!r} and process "
                    f"{proc!r}; a Jepsen op has :type :invoke/:ok/:fail/:info and a :process"
                )
            t = self._time(op)
            if proc == "nemesis":
                self._nemesis(op, typ, t)
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
        f = _f(op)
        p.op_id = f"jepsen-{proc}-{op.get('index', self.ops)}"
        self._op(proc, "invoke", f, op_id=p.op_id, time=t, extra=_index(op))
        pairs = [(k, v) for k, v, _ in _sends(op.get("value"))]
        if pairs:
            p.sends = _Sends(pairs)
            for pair in pairs:
                self.watch[pair] = p.sends

    def _complete(self, proc: str, op: dict[str, Any], typ: str, t: int) -> None:
        p = self.procs.setdefault(proc, _Process())
        f = _f(op)
        op_id = p.op_id or f"jepsen-{proc}-{op.get('index', self.ops)}"
        error = op.get("error")
        self._op(
            proc,
            typ,
            f,
            op_id=op_id,
            time=t,
            error=None if error is None else _text(error),
            extra=_index(op),
        )
        sends, p.sends, p.op_id = p.sends, None, None
        if f in ("assign", "subscribe"):
            self.subscribe |= f == "subscribe"
            if typ != "fail":
                self._reassign(p, {_text(k) for k in op.get("value") or ()})
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
        extra = _index(op)
        produced: list[dict[str, Any]] = []
        committed: dict[str, int] = {}
        for mop in op.get("value") or ():
            if not isinstance(mop, list) or not mop:
                continue
            name = _text(mop[0])
            if name == "send" and len(mop) >= 3:
                k, v, offset = _send(mop)
                if typ == "ok" or (typ == "info" and offset is not None):
                    produced.append(
                        {
                            "key": k,
                            "value": v,
                            "offset": offset,
                            "process": self._producer(proc, p, k),
                            "time": t,
                            "extra": extra,
                        }
                    )
            elif name == "poll" and len(mop) >= 2 and isinstance(mop[1], dict):
                for raw_key, pairs in mop[1].items():
                    k = _text(raw_key)
                    instance = self._instance(proc, p, k, typ, index)
                    for pair in pairs or ():
                        self._deliver(k, pair, instance, typ, t, extra, committed)
        if typ == "ok":
            for e in produced:
                self._produce(**e)
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
                    self._produce(**e)
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
        v = _text(raw_value)
        self.channels.add(k)
        self.polled += 1
        if typ == "ok":
            sends = self.watch.get((k, v))
            if sends is not None:
                sends.proven = True
            if offset is not None and offset > committed.get(k, -1):
                committed[k] = offset
        self._msg(
            "deliver",
            channel=k,
            partition=0,
            offset=offset,
            msg_id=f"{k}/{v}",
            key=k,
            value=v,
            consumer=CONSUMER,
            process=instance,
            time=t,
            extra=extra,
        )

    def _produce(
        self,
        key: str,
        value: str,
        offset: int | None,
        process: str,
        time: int,
        extra: dict[str, Any] | None,
    ) -> None:
        self.channels.add(key)
        self.sends += 1
        self._msg(
            "produce",
            channel=key,
            partition=0,
            offset=offset,
            msg_id=f"{key}/{value}",
            key=key,
            value=value,
            process=process,
            time=time,
            extra=extra,
        )

    def _unwatch(self, sends: _Sends) -> None:
        for pair in sends.pairs:
            if self.watch.get(pair) is sends:
                del self.watch[pair]

    # --- the nemesis -----------------------------------------------------------------

    def _nemesis(self, op: dict[str, Any], typ: str, t: int) -> None:
        """Nemesis ops come in pairs of :info; the second (the fault took effect)
        opens or closes a fault window."""
        f = _f(op)
        if f not in self.nemesis_pending:
            self.nemesis_pending.add(f)
            return
        self.nemesis_pending.discard(f)
        if f.startswith("start-"):
            phase, kind = FaultPhase.START, f.removeprefix("start-")
        elif f.startswith("stop-"):
            phase, kind = FaultPhase.STOP, f.removeprefix("stop-")
        elif f in _NEMESIS_PAIRS:
            phase, kind = _NEMESIS_PAIRS[f]
        else:
            self._event(EventType.MARK, t, kind=f"nemesis:{f}", extra=_index(op))
            return
        value = _text(op.get("value"))
        extra = {"value": value, **(_index(op) or {})}
        if phase == FaultPhase.START:
            if kind in self.faults:
                return  # already open: Jepsen may start a fault twice
            self.fault_ids += 1
            # What the nemesis hit (nodes, a partition's grudge), short enough for a label.
            target = "nemesis" if value is None else value[:60]
            fault_id, _ = self.faults[kind] = (f"jepsen-fault{self.fault_ids}", target)
        else:
            if kind not in self.faults:
                return  # a stop with nothing open (Jepsen heals at the end regardless)
            fault_id, target = self.faults.pop(kind)
        self._event(
            EventType.FAULT,
            t,
            phase=phase,
            kind=kind,
            fault_id=fault_id,
            target=target,
            extra=extra,
        )

    # --- the end ---------------------------------------------------------------------

    def finish(self) -> None:
        """Deferred sends, then the marks that close the history: every channel is done
        (what no consumer read by the end of a Jepsen test it never will) and the end."""
        for sends, produced in self.deferred:
            if sends.proven:
                for e in produced:
                    self._produce(**e)
        t = self.last_time
        for channel in sorted(self.channels):
            self._event(
                EventType.MARK, t, kind=Mark.CONSUMER_DONE, consumer=CONSUMER, channel=channel
            )
        self._event(EventType.MARK, t, kind=Mark.END)

    # --- recording -------------------------------------------------------------------

    def _op(self, process: str, phase: str, f: str, **cols: Any) -> None:
        self.events += 1
        self.rec.op(process, phase, f, **cols)

    def _msg(self, action: str, **cols: Any) -> None:
        self.events += 1
        self.rec.msg(action, **cols)

    def _event(self, type_: str, t: int, extra: dict[str, Any] | None = None, **cols: Any) -> None:
        self.events += 1
        self.rec.record(
            Event(type=type_, time=t, extra=None if extra is None else _json(extra), **cols)
        )


def _f(op: dict[str, Any]) -> str:
    """The op's :f; ops without one (elle-cli style) are named by their micro-ops."""
    f = op.get("f")
    if f is not None:
        return _text(f)
    names = {_text(m[0]) for m in op.get("value") or () if isinstance(m, list) and m}
    return names.pop() if len(names) == 1 else "txn"


def _sends(value: Any) -> Iterator[tuple[str, str, int | None]]:
    for mop in value or ():
        if isinstance(mop, list) and len(mop) >= 3 and _text(mop[0]) == "send":
            yield _send(mop)


def _send(mop: list[Any]) -> tuple[str, str, int | None]:
    """[:send k v] or [:send k [offset v]] as (key, value, offset or None)."""
    k, v = _text(mop[1]), mop[2]
    if isinstance(v, list) and len(v) == 2:
        offset, v = v
        return k, _text(v), offset if type(offset) is int else None
    return k, _text(v), None


def _index(op: dict[str, Any]) -> dict[str, Any] | None:
    """Where the event came from in the Jepsen history (its evidence points there)."""
    index = op.get("index")
    return {"jepsen_index": index} if type(index) is int else None


def _text(value: Any) -> Any:
    """A Jepsen value as driftlab text: keywords by name, numbers in decimal, anything
    else as JSON; None stays None."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    return _json(value)


def _json(value: Any) -> str:
    return orjson.dumps(value, default=_plain, option=orjson.OPT_NON_STR_KEYS).decode()


def _plain(value: Any) -> Any:
    """What JSON lacks: EDN sets as sorted lists, anything else (ratios) as text."""
    if isinstance(value, frozenset):
        return sorted(value, key=str)
    return str(value)
