"""What passes between the harness and a CDC consumer process: its configuration, and
the Debezium change events it reads."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

from driftlab.harness.history.events import MsgFields

CONFIG_ENV = "DRIFTLAB_CONSUMER"
VERSIONED, COUNTER = "versioned", "counter"
AFTER_APPLY, BEFORE_APPLY = "after-apply", "before-apply"


@dataclass
class ConsumerConfig:
    """What one consumer process is told by its parent (JSON in $DRIFTLAB_CONSUMER)."""

    instance: str  # the history `process`: new per start
    group: str  # the history `consumer`: the Kafka group
    topic: str
    partitions: list[int]
    kafka: dict[str, Any]  # the lab's client config on the consumer's link
    redis_host: str
    redis_port: int
    redis_password: str
    prefix: str  # Redis key prefix of the run
    store: str  # the history `store` of its effects
    run_dir: str
    status_path: str
    effect: str = VERSIONED
    commit: str = AFTER_APPLY
    commit_ms: int = 500
    batch: int = 100
    apply_ms: float = 0.0
    id_field: str | None = None  # outbox: the event id column gives msg_id
    redis_timeout: float = 2.0
    control_path: str | None = None  # stepped mode (replay): commands come from this file
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Change:
    """One change event as the consumer sees it."""

    partition: int
    offset: int
    msg_id: str
    key: str
    value: str | None
    version: int
    lsn: int | None

    def fields(self, channel: str) -> MsgFields:
        """The history fields of this change read from `channel` (a message's identity,
        coordinates and content)."""
        return {
            "channel": channel,
            "partition": self.partition,
            "offset": self.offset,
            "msg_id": self.msg_id,
            "key": self.key,
            "value": self.value,
            "version": self.version,
            "source_pos": self.lsn,
        }


def parse_change(msg: Message, id_field: str | None = None) -> Change | None:
    """The change in a Debezium event (JSON without schemas), None for a tombstone or
    an event without a row image after the change."""
    raw = msg.value()
    if raw is None:
        return None
    event = json.loads(raw)
    after = event.get("after")
    if not after:
        return None
    lsn = event.get("source", {}).get("lsn")
    key = str(after["key"])
    msg_id = f"event-{after[id_field]}" if id_field is not None else f"{lsn}:{key}"
    return Change(
        partition=msg.partition(),
        offset=msg.offset(),
        msg_id=msg_id,
        key=key,
        value=after.get("value"),
        version=int(after["version"]),
        lsn=int(lsn) if lsn is not None else None,
    )
