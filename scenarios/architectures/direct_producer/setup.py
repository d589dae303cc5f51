"""Acknowledged produce: the application is a Kafka producer (acks=all, idempotent), the
log is its system of record (claim C16: acknowledged messages survive a broker crash).

    client -> (link app->kafka) -> Kafka topic <ns>.log (key-partitioned)

A write produces `(key, value)` and waits for the broker's answer: on an acknowledgement
the client records the `produce` (partition, offset, `msg_id` = the unique value,
`version` = the offset: strictly increasing per key, as a key keeps its partition) and
completes its `write` op (`store` = `log`) as `ok`; an error or a timeout leaves the
outcome unknown (`info`). After quiescence an auditor (a fresh consumer, no group,
straight to the broker) reads every partition from offset 0 to its end, records a
`deliver` per record (consumer `auditor`) and a `consumer-done` mark: an acknowledged
message missing from the log is a `lost-message`, one read back at other coordinates an
`inconsistent-offset`. The same read is recorded as the log audit (`LOG_AUDIT`), so a
lost message says it is not in the log.

Parameters: `partitions` (default 3), `timeout_s` (the producer's delivery timeout,
default 20).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from driftlab.harness.history.events import MsgFields
from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.schema import LOG_AUDIT
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.kafka_admin import KafkaConfig, TopicSpec, create_topics
from driftlab.harness.lab.setups.base import Client, Setup, SetupContext
from driftlab.harness.lab.setups.connect import APP, KAFKA_CLIENT_TIMEOUTS

LOG_STORE = "log"
AUDITOR = "auditor"

log = logging.getLogger("driftlab.setups.direct_producer")


@dataclass(frozen=True, slots=True)
class AckedLog:
    """The run's topic `<namespace>.log`, which the application's clients produce to
    on their link and wait for each acknowledgement (`timeout_s` at most); the
    direct-producer and bounded-log setups hold one."""

    topic: str
    kafka_app: KafkaConfig  # the lab's client config on the application's link
    kafka_direct: KafkaConfig  # the nodes themselves: set-up and the audit
    timeout_s: float

    @classmethod
    def create(cls, ctx: SetupContext, partitions: int = 1, **settings: Any) -> AckedLog:
        """Create the topic (`partitions`, and `TopicSpec` settings such as retention)
        and the application's link to Kafka; `timeout_s` from the scenario (default 20)."""
        acked = cls(
            topic=f"{ctx.namespace}.log",
            kafka_app=kafka_client_config(ctx.stack, APP),
            kafka_direct=kafka_client_config(ctx.stack),
            timeout_s=float(ctx.params.get("timeout_s", 20)),
        )
        create_topics(acked.kafka_direct, [TopicSpec(acked.topic, partitions, **settings)])
        return acked

    def client(self, rec: Recorder, process: str) -> ProducerClient:
        """A client with its own idempotent producer."""
        return ProducerClient(self, rec, process)


class AckedLogSetup(Setup):
    """The half of the Setup contract that a setup whose application produces to an
    AckedLog (direct-producer, bounded-log) hands to the log: its clients are the log's
    producers, and they read nothing back. `prepare` sets `acked_log`."""

    services = ("kafka",)

    def __init__(self) -> None:
        super().__init__()
        self.acked_log: AckedLog | None = None

    def read_stores(self) -> tuple[str, ...]:
        """Nothing to read: what reached the log is judged from its deliveries."""
        return ()

    def client(self, process: str) -> ProducerClient:
        """A client with its own idempotent producer."""
        assert self.acked_log is not None
        return self.acked_log.client(self.context.recorder, process)


class DirectProducer(AckedLogSetup):
    """The application produces to Kafka with acks=all and waits for each answer."""

    name = "direct-producer"
    stores = ()

    def prepare(self, ctx: SetupContext) -> None:
        """Create the run's topic and the application's link to Kafka."""
        self.ctx = ctx
        partitions = int(ctx.params.get("partitions", 3))
        if partitions < 1:
            raise ValueError(f"direct-producer: partitions={partitions}; use 1 or more")
        self.acked_log = AckedLog.create(ctx, partitions)

    def quiesce(self, timeout: float) -> bool:
        """Read the whole topic back as the auditor (one `deliver` per record)."""
        deadline = time.monotonic() + timeout
        rec = self.context.recorder
        assert self.acked_log is not None
        topic = self.acked_log.topic
        reader = Consumer(
            {
                **self.acked_log.kafka_direct,
                "group.id": f"auditor-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            },
            logger=log,
        )
        try:
            meta = reader.list_topics(topic, timeout=30).topics[topic]
            parts = sorted(meta.partitions)
            ends = {p: reader.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in parts}
            reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
            position = dict.fromkeys(parts, 0)
            while any(position[p] < ends[p] for p in parts):
                if time.monotonic() >= deadline:
                    return False
                for msg in reader.consume(num_messages=500, timeout=0.2):
                    if msg.error() is not None:
                        continue
                    position[msg.partition()] = msg.offset() + 1
                    fields = message_fields(msg)
                    rec.msg("deliver", consumer=AUDITOR, process=AUDITOR, attempt=1, **fields)
                    # The auditor's read is the log read back: the log audit, which says
                    # where each lost message went.
                    rec.msg("deliver", consumer=LOG_AUDIT, process=LOG_AUDIT, **fields)
        finally:
            reader.close()
        rec.mark("consumer-done", consumer=AUDITOR, channel=topic)
        rec.mark("consumer-done", consumer=LOG_AUDIT, channel=topic)
        return True

    def final_states(self) -> dict[str, dict[str, tuple[str, int | None]]]:
        """None: the log's contents are recorded as the auditor's deliveries."""
        return {}


def message_fields(msg: Message) -> MsgFields:
    """A record's fields for its `produce` or `deliver` events (`msg_id` = the unique
    value, `version` = the offset)."""
    key = msg.key().decode() if msg.key() is not None else None
    value = msg.value().decode() if msg.value() is not None else None
    return {
        "channel": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "msg_id": value,
        "key": key,
        "value": value,
        "version": msg.offset(),
    }


class ProducerClient(Client):
    """One application instance: an idempotent producer, one message in flight."""

    def __init__(self, acked_log: AckedLog, rec: Recorder, process: str) -> None:
        super().__init__(rec, process)
        self.acked_log = acked_log
        timeout_ms = int(acked_log.timeout_s * 1000)
        self.producer = Producer(
            {
                **acked_log.kafka_app,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "delivery.timeout.ms": timeout_ms,
                "request.timeout.ms": min(timeout_ms, 5000),
                **KAFKA_CLIENT_TIMEOUTS,
            },
            logger=log,
        )

    def write(self, key: str, value: str) -> None:
        """Produce (key, value) and wait for the broker's acknowledgement."""
        op = self.rec.invoke(self.process, "write", key=key, value=value, store=LOG_STORE)
        outcome: dict[str, Any] = {}

        def delivered(err: KafkaError | None, msg: Message) -> None:
            outcome["err"], outcome["msg"] = err, msg

        self.producer.produce(self.acked_log.topic, key=key, value=value, on_delivery=delivered)
        deadline = time.monotonic() + self.acked_log.timeout_s + 10
        while "msg" not in outcome and time.monotonic() < deadline:
            self.producer.poll(0.1)
        err, msg = outcome.get("err"), outcome.get("msg")
        if msg is None or err is not None:
            # Not acknowledged: the message may or may not be in the log.
            self.rec.complete(op, "info", error=str(err or "no answer from the producer"))
            return
        # The producer is named: its sends to a partition must get increasing offsets
        # (nonmonotonic-send, Jepsen's kafka check), which a truncated log breaks.
        self.rec.msg("produce", process=self.process, **message_fields(msg))
        # No version on the op: acknowledgements of concurrent clients come back in any
        # order, and only the log's own order (the produce's offset) is meaningful.
        self.rec.complete(op, "ok")

    def delete(self, key: str) -> None:
        """Not offered: the log is append-only."""
        raise ValueError("direct-producer has no delete; use a write-only mix")

    def read(self, key: str, store: str) -> None:
        """Not offered: the auditor reads the log after quiescence."""
        raise ValueError("direct-producer has no reads; use a write-only mix")

    def close(self) -> None:
        """Wait briefly for anything still in flight (its outcome stays unknown)."""
        with contextlib.suppress(Exception):
            self.producer.flush(1.0)
