"""The audit of a change topic at quiesce: what Debezium produced, read back whole.

A fresh Kafka consumer (no group) reads the topic from offset 0 until every key has
reached its final version and the end offsets, and records one `produce` per change
event (time: the record's Kafka timestamp; partition, offset, `msg_id`) and, being the
log read back, a `deliver` of it to the log audit (`LOG_AUDIT`), with its
`consumer-done` mark once it has read to the end offsets.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.schema import LOG_AUDIT
from driftlab.scenarios.architectures.cdc.protocol import parse_change

log = logging.getLogger("driftlab.setups.cdc")


def audit_topic(
    rec: Recorder,
    kafka: Mapping[str, Any],
    topic: str,
    want: dict[str, int],
    deadline: float,
    id_field: str | None = None,
) -> dict[int, int] | None:
    """Read `topic` from 0 until every key's final version in `want` and the end
    offsets; record a `produce` per change event. Returns the end offsets (None: timed
    out first)."""
    reader = Consumer(
        {
            **kafka,
            "group.id": f"auditor-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        },
        logger=log,
    )
    n = len(reader.list_topics(topic, timeout=10).topics[topic].partitions)
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(n)])
    seen: dict[str, int] = {}
    position = dict.fromkeys(range(n), 0)
    ends: dict[int, int] | None = None
    try:
        while time.monotonic() < deadline:
            for msg in reader.consume(num_messages=500, timeout=0.2):
                if msg.error() is not None:
                    continue
                position[msg.partition()] = msg.offset() + 1
                change = parse_change(msg, id_field)
                if change is None:
                    continue
                seen[change.key] = max(seen.get(change.key, 0), change.version)
                record = change.fields(topic)
                rec.msg("produce", **record, time=msg.timestamp()[1] * 1_000_000)
                # The same read is the log audit: this change is in the log now.
                rec.msg("deliver", **record, consumer=LOG_AUDIT, process=LOG_AUDIT)
            if ends is None and all(seen.get(k, 0) >= v for k, v in want.items()):
                # Every change is in: what the topic holds now is all there will be.
                ends = {
                    p: reader.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                    for p in range(n)
                }
            if ends is not None and all(position[p] >= e for p, e in ends.items()):
                rec.mark("consumer-done", consumer=LOG_AUDIT, channel=topic)
                return ends
        missing = {k: v for k, v in want.items() if seen.get(k, 0) < v}
        log.warning("audit timed out; keys short of their final version: %s", missing)
        return None
    finally:
        reader.close()
