"""Typed constructors of history events: the one place that spells each type's fields.

The real recorder (driftlab.harness.history.recorder), the simulator's recorder
(driftlab.harness.lab.explore.sim.recorder) and so the Jepsen importer build every event through
these functions, so a real run's history, a simulated one and an imported one cannot
drift apart. Each returns the event's fields
(`type` set, absent fields left out) after checking what only one value may be: an op's
phase, a message's action, a fault window's phase. `extra` is a dict, or its JSON text;
`time` is left out for the recorder to stamp, or given (an imported history's own).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, Unpack

from driftlab.harness.history.schema import EventType, FaultPhase, MsgAction, OpPhase

OP_PHASES = frozenset(p.value for p in OpPhase)
COMPLETIONS = OP_PHASES - {OpPhase.INVOKE.value}
MSG_ACTIONS = frozenset(a.value for a in MsgAction)

Fields = dict[str, Any]


def _present(type: EventType, **fields: Any) -> Fields:
    return {"type": type.value, **{k: v for k, v in fields.items() if v is not None}}


def _in_order(declared: type, fields: Mapping[str, Any]) -> dict[str, Any]:
    # The declared order, not the caller's: a history's JSON lines then spell every
    # fault and mark alike, whoever recorded them.
    names = declared.__annotations__
    if unknown := fields.keys() - names.keys():
        raise TypeError(f"{declared.__name__} has no field {', '.join(sorted(unknown))}")
    return {name: fields.get(name) for name in names}


class OpFields(TypedDict, total=False):
    """The optional fields of an OP event."""

    op_id: str | None
    key: str | None
    value: str | None
    version: int | None
    store: str | None
    source_pos: int | None  # the commit's log position where known (the simulator's LSN)
    error: str | None
    extra: dict[str, Any] | str | None
    time: int | None


class MsgFields(TypedDict, total=False):
    """The optional fields of a MSG event: where the message is, what it carries, who
    handled it."""

    channel: str | None
    msg_id: str | None
    key: str | None
    value: str | None
    version: int | None
    partition: int | None
    offset: int | None
    consumer: str | None
    process: str | None
    store: str | None
    attempt: int | None
    source_pos: int | None
    error: str | None
    extra: dict[str, Any] | str | None
    time: int | None


def op(process: str, phase: str, f: str, **fields: Unpack[OpFields]) -> Fields:
    """An OP event: a client's invocation (`invoke`) or its completion (ok/fail/info)."""
    if phase not in OP_PHASES:
        raise ValueError(f"op phase {phase!r} is not one of {sorted(OP_PHASES)}")
    return _present(EventType.OP, process=process, phase=phase, f=f, **fields)


def msg(action: str, **fields: Unpack[MsgFields]) -> Fields:
    """A MSG event: one step of a message's life (produce, deliver, apply, skip, ack,
    commit)."""
    if action not in MSG_ACTIONS:
        raise ValueError(f"msg action {action!r} is not one of {sorted(MSG_ACTIONS)}")
    return _present(EventType.MSG, action=action, **fields)


class FaultFields(TypedDict, total=False):
    """The optional fields of a FAULT event."""

    target: str | None
    fault_id: str | None
    error: str | None
    extra: dict[str, Any] | str | None
    time: int | None


def fault(phase: str, kind: str, **fields: Unpack[FaultFields]) -> Fields:
    """A FAULT event: a fault window opening (`start`) or closing (`stop`)."""
    if phase not in (FaultPhase.START, FaultPhase.STOP):
        raise ValueError(f"fault phase {phase!r} is not 'start' or 'stop'")
    return _present(EventType.FAULT, phase=phase, kind=kind, **_in_order(FaultFields, fields))


def state(
    store: str,
    key: str | None,
    value: str | None,
    *,
    version: int | None = None,
    extra: dict[str, Any] | str | None = None,
) -> Fields:
    """A STATE event: one key of a store's final contents; `key` None says the store
    was read and found empty."""
    return _present(
        EventType.STATE, store=store, key=key, value=value, version=version, extra=extra
    )


class MarkFields(TypedDict, total=False):
    """The optional fields of a MARK event."""

    consumer: str | None
    channel: str | None
    store: str | None
    process: str | None
    extra: dict[str, Any] | str | None
    time: int | None


def mark(kind: str, **fields: Unpack[MarkFields]) -> Fields:
    """A MARK event: a named point of the run (a driftlab.harness.history.schema.Mark or other)."""
    return _present(EventType.MARK, kind=kind, **_in_order(MarkFields, fields))
