"""A Kafka topic as a derived store, read from outside to its end.

The reader keeps one consumer for the whole run, assigned every partition of the topic
from its beginning, in no consumer group (the client wants a group id, which an
assigned consumer never joins): it commits nothing, shows in no group the user's
programs could see, and leaves nothing to clean up. Each reading goes on from
where the last one stopped and reads up to the partitions' ends as they are then, so
a sample every 200 ms costs what was written since the last one, not the whole topic
again. What it builds is what a read from the beginning would give: a mirror keeps the
latest value per key (a null value, a tombstone, removes the key), which compaction
keeps too; a log counts every record that arrived, which retention or compaction
removing it later does not undo. A topic whose end moves back (a broker that lost
records) is read again from its beginning.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any

import orjson
import tenacity
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from driftlab.harness.lab.setups.stores import State
from driftlab.scenarios.pipeline.record_fields import as_text, as_version, pick
from driftlab.scenarios.pipeline.spec_sections import FieldPaths

log = logging.getLogger("driftlab.pipeline")

READ_TIMEOUT_S = 10.0
"""How long one reading may take to reach the topic's end before it counts as failed."""
BATCH = 1000
_MOVING = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
)
"""Errors of a topic just made or a leader moving, which librdkafka does not always
mark retriable when it answers a watermark query."""


def consumer_config(login: dict[str, Any]) -> dict[str, Any]:
    """The settings of driftlab's own consumer of a store's topic: `login` (the
    bootstrap servers and SASL login, driftlab.scenarios.pipeline.links.Reach.kafka_config) and
    the one place the rest is set. Partitions are assigned and offsets never
    committed: the group id is never joined."""
    return {
        **login,
        "group.id": "driftlab-observer",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "socket.timeout.ms": 5000,
    }


class KafkaReader:
    """Topic `topic`: its records' key, value and version where `paths` says."""

    def __init__(self, login: dict[str, Any], topic: str, paths: FieldPaths) -> None:
        self.topic = topic
        self.paths = paths
        self._consumer = Consumer(consumer_config(login), logger=log)
        self._lock = threading.Lock()  # the observer and a workload client may read at once
        self._next: dict[int, int] = {}  # partition -> the next offset to read
        self._state: State = {}
        self._arrived: Counter[tuple[str, str]] = Counter()
        self.undecodable = 0  # records without a key, or whose JSON the paths cannot read

    def read_all(self) -> State:
        """Every key's latest value (a mirror), the topic read to its end."""
        with self._lock:
            self._catch_up()
            return dict(self._state)

    def rows(self) -> Counter[tuple[str, str]]:
        """How many records of each (key, value) the topic has had (a log)."""
        with self._lock:
            self._catch_up()
            return Counter(self._arrived)

    def close(self) -> None:
        """Close the consumer (it committed nothing: nothing stays behind)."""
        self._consumer.close()

    def _catch_up(self) -> None:
        deadline = time.monotonic() + READ_TIMEOUT_S
        meta = self._consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
        if meta is None or meta.error is not None:
            if meta is not None and meta.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise KafkaException(meta.error)
            return  # not made yet: it holds nothing
        new = sorted(set(meta.partitions) - set(self._next))
        if new:
            self._consumer.incremental_assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in new]
            )
            self._next.update(dict.fromkeys(new, 0))
        ends = {}
        for p in self._next:
            low, high = self._watermarks(p, deadline)
            if high < self._next[p]:
                log.warning("topic %s[%d] ends below what was read: read again", self.topic, p)
                self._restart()
                return self._catch_up()
            ends[p] = (low, high)
        while behind := [p for p, (low, high) in ends.items() if max(self._next[p], low) < high]:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"topic {self.topic} not read to its end in {READ_TIMEOUT_S} s")
            for msg in self._consumer.consume(num_messages=BATCH, timeout=0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(err)
                self._take(msg)
                self._next[msg.partition()] = max(self._next[msg.partition()], msg.offset() + 1)
            # Past gaps (compaction, transaction markers) the consumer's position moves on.
            for tp in self._consumer.position([TopicPartition(self.topic, p) for p in behind]):
                if tp.offset >= 0:
                    self._next[tp.partition] = max(self._next[tp.partition], tp.offset)

    def _watermarks(self, partition: int, deadline: float) -> tuple[int, int]:
        """Partition `partition`'s low and high offsets; a retriable error (a leader
        moving, a topic just made) is asked again until `deadline`."""
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(_passing),
            wait=tenacity.wait_fixed(0.1),
            stop=tenacity.stop_after_delay(deadline - time.monotonic()),
            reraise=True,
        )(self._consumer.get_watermark_offsets, TopicPartition(self.topic, partition), timeout=5)

    def _restart(self) -> None:
        self._consumer.unassign()
        self._next.clear()
        self._state.clear()
        self._arrived.clear()

    def _take(self, msg: Message) -> None:
        try:
            key, value, version = self._decode(msg.key(), msg.value())
        except ValueError as exc:
            key, value, version = None, None, None
            log.debug("topic %s offset %d: %s", self.topic, msg.offset(), exc)
        if key is None:
            if not self.undecodable:
                log.warning(
                    "topic %s: a record at offset %d has no key where [stores] says",
                    self.topic,
                    msg.offset(),
                )
            self.undecodable += 1
            return
        if value is None:
            self._state.pop(key, None)
            return
        self._state[key] = (value, version)
        self._arrived[(key, value)] += 1

    def _decode(
        self, raw_key: bytes | None, raw_value: bytes | None
    ) -> tuple[str | None, str | None, int | None]:
        p = self.paths
        if raw_key is None:
            return None, None, None
        key = (
            raw_key.decode(errors="replace")
            if p.key is None
            else as_text(pick(orjson.loads(raw_key), p.key))
        )
        if raw_value is None:
            return key, None, None  # a tombstone
        doc = orjson.loads(raw_value) if p.value is not None or p.version is not None else None
        value = (
            raw_value.decode(errors="replace") if p.value is None else as_text(pick(doc, p.value))
        )
        version = as_version(pick(doc, p.version)) if p.version is not None else None
        return key, value, version


def _passing(exc: BaseException) -> bool:
    """Whether `exc` is a Kafka error that passes: retriable, or a leader moving."""
    err = exc.args[0] if isinstance(exc, KafkaException) else None
    return err is not None and (err.retriable() or err.code() in _MOVING)
