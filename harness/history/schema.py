"""The history schema: the contract between running a scenario and judging it.

A history is a sequence of flat events. Every event has the same columns (most of them
nullable), so the whole history is one table in JSON lines while a run streams, and one
Parquet file for analysis. `docs/history.md` documents every column and kind.

Bump `SCHEMA_VERSION` on any incompatible change and keep a reader for the old one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

SCHEMA_VERSION = 1


class EventType(StrEnum):
    """What an event records."""

    HEADER = "header"  # first event of every segment: run id, scenario, seed, schema
    OP = "op"  # a client operation, Jepsen style
    MSG = "msg"  # a message moving through a broker or a consumer
    FAULT = "fault"  # a fault window opening or closing
    STATE = "state"  # one key of one store's final state, after heal and quiescence
    MARK = "mark"  # a point in the run: workload done, quiesced, consumer done, end


class OpPhase(StrEnum):
    """Jepsen's completion types: `info` means the outcome is unknown."""

    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


class MsgAction(StrEnum):
    """Steps of a message's life, from the producer to the derived store."""

    PRODUCE = "produce"  # the broker acknowledged the message (offset known)
    DELIVER = "deliver"  # a consumer received it (attempt counts redeliveries)
    APPLY = "apply"  # its effect was written to a derived store
    SKIP = "skip"  # the consumer saw it and chose not to apply it (older version)
    ACK = "ack"  # AMQP-style ack of one message
    COMMIT = "commit"  # a consumer committed an offset: everything below `offset`


class FaultPhase(StrEnum):
    START = "start"
    STOP = "stop"


class Mark(StrEnum):
    """Named points of a run, recorded as MARK events in `kind`."""

    WORKLOAD_START = "workload-start"  # the clients and the fault schedule's clock start
    WORKLOAD_DONE = "workload-done"
    HEALED = "healed"
    QUIESCED = "quiesced"
    CONSUMER_DONE = "consumer-done"  # `consumer` has read everything it will read
    END = "end"  # the run finished writing its history: absent means cut short
    FAULT_UNMET = "fault-unmet"  # a fault at a moment never opened: `extra` says why


SOURCE_STORE = "source"
"""The `store` name of the source of truth (the system of record)."""

STEP = "step"
"""The `extra` key of an op invocation that is a step of a client's operation rather than
an operation of its own: a dual write's write to a derived store (`derived-write`) or its
deletion of a key whose derived write failed (`invalidate`). The checkers judge it as
any op; throughput and latency count operations only, as the runner does."""
LOG_AUDIT = "log-audit"
"""The `consumer` of a broker's log read back after quiescence: its `deliver` of a
message says the message was still in the log then, its `consumer-done` mark for a
channel that the whole channel was read. It stands for the log, not for a subscriber:
the checkers never judge its deliveries as a consumer's (docs/checkers.md)."""
OBSERVER = "observer"
"""The `process` of driftlab's own reads of a pipeline's derived stores, sampled from
outside (driftlab.scenarios.pipeline.observer): each `ok` read is the first sighting of a value
(or of its absence) in a store. No client of the workload: the checkers take the lag
and stale-overwrite from them, the report leaves them out of the client operations."""


class Compact:
    """A dataclass whose dict leaves out its unset (None) fields: compact JSON (a
    history's events, an explored schedule's steps)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """The record as a dict without its unset fields."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(slots=True)
class Event(Compact):
    """One history event. Which fields are set depends on `type` (see docs/history.md).

    `time` is wall-clock nanoseconds since the epoch (one machine, one clock);
    `writer` and `seq` identify the recorder segment and order within it, so events
    with equal times keep their recorded order.
    """

    type: str
    time: int = 0
    writer: str | None = None
    seq: int | None = None
    # client operations
    process: str | None = None
    phase: str | None = None
    f: str | None = None
    op_id: str | None = None
    # shared by ops, messages and states
    key: str | None = None
    value: str | None = None
    version: int | None = None
    store: str | None = None
    # messages
    action: str | None = None
    channel: str | None = None
    partition: int | None = None
    offset: int | None = None
    msg_id: str | None = None
    consumer: str | None = None
    attempt: int | None = None
    source_pos: int | None = None
    # faults and marks
    kind: str | None = None
    target: str | None = None
    fault_id: str | None = None
    # free text and structured extras (JSON-encoded object)
    error: str | None = None
    extra: str | None = None


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Event))
INT_COLUMNS = frozenset({"time", "seq", "version", "partition", "offset", "attempt", "source_pos"})
REQUIRED_COLUMNS = frozenset({"type", "time"})


@dataclass(slots=True)
class RunHeader:
    """Run identity, written as the HEADER event's `extra`."""

    run_id: str
    scenario: str
    seed: int
    schema: int = SCHEMA_VERSION
    params: dict[str, Any] = field(default_factory=dict)
