"""The history recorder: the typed events of the schema (ops, messages, faults, final
states, marks), appended to the writer's own durable segment (`SegmentWriter`)."""

from __future__ import annotations

import itertools
from types import TracebackType
from typing import Any, Unpack

from driftlab.harness.history import events
from driftlab.harness.history.schema import COLUMNS, Event, FaultPhase, Mark, OpPhase
from driftlab.harness.history.segment import EVENT_TYPES
from driftlab.harness.history.segment_writer import SegmentWriter, json_text


class Recorder(SegmentWriter):
    """Appends the events of one writer (a process) to its own segment of a run.

    Use one recorder per process (share it between threads); a forked child gets a new
    writer and segment automatically. Close it (or use it as a context manager) so the
    last batch is written: a forked child leaving through `os._exit`, as
    multiprocessing's children do, must call `close()` first. Whoever ends the run calls
    `end()`, which records the END mark that tells readers the history is complete.
    """

    def _reset(self) -> None:
        """A new writer; its op and fault ids start again (a forked child's own)."""
        super()._reset()
        self._ids = itertools.count(1)
        self._inflight_ops: dict[str, dict[str, Any]] = {}
        self._open_faults: dict[str, dict[str, Any]] = {}

    def end(self) -> None:
        """Record the END mark (the run closed its history cleanly) and close."""
        self.mark(Mark.END)
        self.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- recording ---------------------------------------------------------------------

    def record(self, event: Event) -> None:
        """Append an event; `writer` and `seq` are assigned, `time` if it is 0."""
        if event.type not in EVENT_TYPES:
            raise ValueError(
                f"unknown event type {event.type!r}; use driftlab.harness.history.EventType"
            )
        fields = {c: v for c in COLUMNS if (v := getattr(event, c)) is not None}
        if not fields.get("time"):
            fields.pop("time", None)
        self._emit(fields)

    def op(self, process: str, phase: str, f: str, **fields: Unpack[events.OpFields]) -> None:
        """Record one OP event (an invocation or a completion) as given."""
        self._emit_fields(events.op(process, phase, f, **fields))

    def invoke(
        self,
        process: str,
        f: str,
        *,
        key: str | None = None,
        value: str | None = None,
        store: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Record the invocation of an operation; returns the op_id to `complete` it."""
        op_id = f"{self.writer}-op{next(self._ids)}"
        self.op(
            process, OpPhase.INVOKE, f, op_id=op_id, key=key, value=value, store=store, extra=extra
        )
        self._inflight_ops[op_id] = {
            "process": process,
            "f": f,
            "key": key,
            "value": value,
            "store": store,
        }
        return op_id

    def complete(
        self,
        op_id: str,
        phase: str,
        *,
        value: str | None = None,
        version: int | None = None,
        error: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Complete an invoked operation: `ok`, `fail` (did not happen) or `info` (unknown).

        Process, f, key and store repeat those of the invocation; `value` defaults to
        the invoked value (a write) and is what was read for a read.
        """
        if phase not in events.COMPLETIONS:
            raise ValueError(
                f"completion phase {phase!r} is not one of {sorted(events.COMPLETIONS)}"
            )
        try:
            inv = self._inflight_ops.pop(op_id)
        except KeyError:
            raise ValueError(f"op {op_id!r} was not invoked on this recorder") from None
        self.op(
            inv["process"],
            phase,
            inv["f"],
            op_id=op_id,
            key=inv["key"],
            value=value if value is not None else inv["value"],
            version=version,
            store=inv["store"],
            error=error,
            extra=extra,
        )

    def msg(self, action: str, **fields: Unpack[events.MsgFields]) -> None:
        """Record one step of a message's life (produce, deliver, apply, skip, ack, commit)."""
        self._emit_fields(events.msg(action, **fields))

    def fault(self, phase: str, kind: str, **fields: Unpack[events.FaultFields]) -> None:
        """Record a fault window opening (`start`) or closing (`stop`) as given."""
        self._emit_fields(events.fault(phase, kind, **fields))

    def fault_start(
        self, kind: str, target: str | None = None, *, extra: dict[str, Any] | None = None
    ) -> str:
        """Open a fault window; returns the fault_id to pass to `fault_stop`."""
        fault_id = f"{self.writer}-fault{next(self._ids)}"
        self.fault(FaultPhase.START, kind, target=target, fault_id=fault_id, extra=extra)
        self._open_faults[fault_id] = {"kind": kind, "target": target}
        return fault_id

    def fault_stop(
        self, fault_id: str, *, error: str | None = None, extra: dict[str, Any] | None = None
    ) -> None:
        """Close the fault window `fault_id` (kind and target repeat those of its start)."""
        try:
            f = self._open_faults.pop(fault_id)
        except KeyError:
            raise ValueError(f"fault {fault_id!r} was not started on this recorder") from None
        self.fault(
            FaultPhase.STOP,
            f["kind"],
            target=f["target"],
            fault_id=fault_id,
            error=error,
            extra=extra,
        )

    def state(
        self,
        store: str,
        key: str | None,
        value: str | None,
        *,
        version: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Record one key of one store's final state (after heal and quiescence); `key`
        None records a store read empty."""
        self._emit_fields(events.state(store, key, value, version=version, extra=extra))

    def mark(self, kind: str, **fields: Unpack[events.MarkFields]) -> None:
        """Record a named point of the run (a `driftlab.harness.history.Mark` value, or another)."""
        self._emit_fields(events.mark(kind, **fields))

    def _emit_fields(self, event: events.Fields) -> None:
        extra = event.get("extra")
        if extra is not None and not isinstance(extra, str):
            event["extra"] = json_text(extra)
        self._emit(event)
