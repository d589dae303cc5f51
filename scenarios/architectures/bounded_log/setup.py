"""A log with bounded retention read by a fast and a slow consumer (claim C6: the log is
a ring buffer; a consumer that falls behind its tail misses messages).

    client -> (link app->kafka) -> Kafka topic <ns>.log (retention.ms, tiny segments)
                                       |--> consumer `fast`  (keeps up)
                                       '--> consumer `slow`  (work per message)

Why Kafka rather than NATS JetStream: Kafka's retention is the log DDIA chapter 11
describes (whole old segments are deleted from disk, the consumer's offset is its own
business), and a consumer whose offset fell off the tail gets OFFSET_OUT_OF_RANGE and
is reset to the oldest retained offset by `auto.offset.reset=earliest`: the skipped
offsets are visible in the history as a jump. Kafka only deletes closed segments, so
the topic rolls a segment every `segment_ms` and keeps `retention_ms` of data; the
stack's broker checks retention every second, so messages vanish within seconds.

The application's writes are acknowledged produces (acks=all), as in the
direct-producer setup: a `produce` event (msg_id = the unique value, version = the
offset) per acknowledgement, the `write` op on store `log`. Each consumer is a thread
with its own Kafka consumer (through the link `consumer->kafka`), reading the one
partition from offset 0 and recording a `deliver` per record under its own consumer
name. The slow consumer keeps librdkafka's prefetch queue tiny, so what it has not
read is still on the broker (and can be deleted there) rather than buffered locally.

Parameters: `retention_ms` (default 3000), `segment_ms` (250), `slow_ms` (the slow
consumer's work per message, default 0; C6 uses 100), `timeout_s` (the producer's,
default 20). A `slow-consumer` fault on `fast` or `slow` adds its delay to theirs.

Quiesce waits until both consumers have read up to the topic's end offsets, then marks
`consumer-done` for each with its counts (delivered, offsets skipped) in `extra`, and
reads the log back (the log audit, as Kafka's own system tests tell data loss from a
consumer that missed): a fresh reader from the log start to the end offset records a
`deliver` to `LOG_AUDIT` per record still there and a `consumer-done` mark, so that
each message the slow consumer lost says whether retention had removed it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.schema import LOG_AUDIT
from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.kafka_admin import (
    KafkaConfig,
    TopicSpec,
    admin_client,
    create_topics,
)
from driftlab.harness.lab.setups.base import SetupContext
from driftlab.harness.lab.setups.connect import KAFKA_CLIENT_TIMEOUTS
from driftlab.scenarios.architectures.direct_producer.setup import (
    AckedLog,
    AckedLogSetup,
    message_fields,
)

FAST, SLOW = "fast", "slow"
CONSUMER_LINK = "consumer"

log = logging.getLogger("driftlab.setups.bounded_log")


class LogConsumer(threading.Thread):
    """One consumer of the topic: records a `deliver` per record it reads.

    `delay_s` (base) plus `extra_delay_s` (set by a slow-consumer fault) is slept after
    every record: the consumer's own work per message.
    """

    def __init__(
        self,
        name: str,
        topic: str,
        kafka: KafkaConfig,
        recorder: Recorder,
        delay_s: float,
        *,
        prefetch: bool,
    ) -> None:
        super().__init__(name=f"consumer-{name}", daemon=True)
        self.consumer = name
        self.topic = topic
        self.rec = recorder
        self.delay_s = delay_s
        self.extra_delay_s = 0.0
        self.position = 0  # next offset to read
        self.delivered = 0
        self.skipped = 0  # offsets jumped over (deleted before this consumer read them)
        self.stopping = threading.Event()
        config: dict[str, Any] = {
            **kafka,
            "group.id": f"{topic}-{name}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **KAFKA_CLIENT_TIMEOUTS,
        }
        # A slow consumer takes one message at a time: a batch taken at once would move
        # its fetch position far ahead of what it has processed.
        self.batch = 100 if prefetch else 1
        if not prefetch:
            # librdkafka prefetches up to 64 MiB per partition by default: a slow
            # consumer would hold the whole log in memory and never fall behind the
            # broker's retention.
            # Over those thresholds librdkafka waits fetch.queue.backoff.ms (1 s by
            # default) before the next fetch: the consumer would be slow without a fault.
            config |= {
                "fetch.queue.backoff.ms": 10,
                "queued.min.messages": 1,
                "queued.max.messages.kbytes": 1,
                "fetch.message.max.bytes": 1024,
                "fetch.max.bytes": 1024,
                "message.max.bytes": 1000,
            }
        self.kafka = Consumer(config, logger=log)

    def run(self) -> None:
        """Read from its position (offset 0 at first) until stopped."""
        start = self.position if self.position else OFFSET_BEGINNING
        self.kafka.assign([TopicPartition(self.topic, 0, start)])
        try:
            while not self.stopping.is_set():
                msgs = self.kafka.consume(num_messages=self.batch, timeout=0.2)
                if not msgs:
                    self.catch_up()
                for msg in msgs:
                    if msg.error() is not None:
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            log.warning("%s: kafka: %s", self.consumer, msg.error())
                        continue
                    self.deliver(msg)
                    pause = self.delay_s + self.extra_delay_s
                    if pause:
                        time.sleep(pause)
        finally:
            self.kafka.close()

    def poll_one(self, timeout: float) -> str | None:
        """Replay, before the thread starts: read the one next record the broker still
        holds; return its value (None: nothing within `timeout`).

        Assigning the partition at the position each time drops whatever librdkafka
        prefetched, so a record the broker deleted since is missed, not read from a
        local buffer; a position below the log start resets to it (`earliest`).
        """
        self.kafka.assign([TopicPartition(self.topic, 0, self.position)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in self.kafka.consume(num_messages=1, timeout=0.2):
                if msg.error() is None:
                    self.deliver(msg)
                    return msg.value().decode() if msg.value() is not None else None
        return None

    def catch_up(self) -> None:
        """When idle, move past offsets the broker no longer holds: after retention
        deleted every record this consumer had not read, it is reset to an empty log
        and nothing is delivered, yet everything below the log start is gone for it."""
        try:
            low, _ = self.kafka.get_watermark_offsets(
                TopicPartition(self.topic, 0), timeout=5, cached=False
            )
        except KafkaException as exc:
            log.warning("%s: watermarks: %s", self.consumer, exc)
            return
        if low > self.position:
            self.skipped += low - self.position
            self.position = low

    def deliver(self, msg: Message) -> None:
        """Record the delivery; an offset past the expected one is a reset past deleted
        segments."""
        if msg.offset() > self.position:
            log.info(
                "%s: offsets %d..%d are gone (retention): reset to %d",
                self.consumer,
                self.position,
                msg.offset() - 1,
                msg.offset(),
            )
            self.skipped += msg.offset() - self.position
        value = msg.value().decode() if msg.value() is not None else None
        self.rec.msg(
            "deliver",
            channel=self.topic,
            partition=msg.partition(),
            offset=msg.offset(),
            msg_id=value,
            key=msg.key().decode() if msg.key() is not None else None,
            value=value,
            version=msg.offset(),
            consumer=self.consumer,
            process=self.consumer,
            attempt=1,
        )
        self.delivered += 1
        self.position = msg.offset() + 1


class BoundedLog(AckedLogSetup):
    """Acknowledged produces into a topic with tiny retention; a fast and a slow reader."""

    name = "bounded-log"
    stores = ()

    def __init__(self) -> None:
        super().__init__()
        self.topic = ""
        self.kafka_direct: KafkaConfig = {}
        self.consumers: dict[str, LogConsumer] = {}

    def prepare(self, ctx: SetupContext) -> None:
        """The run's topic (one partition, bounded retention) and the two consumers."""
        self.ctx = ctx
        p = ctx.params
        retention_ms = int(p.get("retention_ms", 3000))
        segment_ms = int(p.get("segment_ms", 250))
        if not 0 < segment_ms < retention_ms:
            raise ValueError(
                f"bounded-log: segment_ms={segment_ms}, retention_ms={retention_ms}; Kafka "
                "deletes only closed segments, so use 0 < segment_ms < retention_ms"
            )
        slow_ms = float(p.get("slow_ms", 0))
        self.acked_log = AckedLog.create(ctx, retention_ms=retention_ms, segment_ms=segment_ms)
        self.topic, self.kafka_direct = self.acked_log.topic, self.acked_log.kafka_direct
        self.warm_up()
        kafka = kafka_client_config(ctx.stack, CONSUMER_LINK)
        self.consumers = {
            FAST: LogConsumer(FAST, self.topic, kafka, ctx.recorder, 0.0, prefetch=True),
            SLOW: LogConsumer(
                SLOW, self.topic, kafka, ctx.recorder, slow_ms / 1000, prefetch=False
            ),
        }

    def warm_up(self, timeout: float = 60.0) -> None:
        """One acknowledged idempotent produce to a topic of its own. A broker that has
        just started answers InitProducerId with COORDINATOR_LOAD_IN_PROGRESS for
        seconds: the workload's producers would spend its start waiting, and a log
        written that slowly never leaves the slow consumer behind."""
        topic = f"{self.context.namespace}.warm-up"
        create_topics(self.kafka_direct, [TopicSpec(topic, 1)])
        assert self.acked_log is not None
        producer = Producer(
            {**self.acked_log.kafka_app, "acks": "all", "enable.idempotence": True}, logger=log
        )
        producer.produce(topic, b"warm-up")
        if producer.flush(timeout):
            raise ServiceError(
                f"bounded-log: no acknowledgement from Kafka within {timeout:.0f}s; see the "
                "kafka log"
            )

    def start(self) -> None:
        """Start both consumers."""
        for c in self.consumers.values():
            c.start()

    def trim(self, before: int) -> None:
        """Delete the records below offset `before` (DeleteRecords): what retention
        does to old segments, at a moment a replay chooses."""
        admin = admin_client(self.kafka_direct)
        (future,) = admin.delete_records([TopicPartition(self.topic, 0, before)]).values()
        future.result(timeout=30)

    def slow_consumer(self, name: str, delay_s: float) -> None:
        """Add `delay_s` of work per message to consumer `name` (`fast` or `slow`)."""
        if name not in self.consumers:
            raise ValueError(
                f"bounded-log has no consumer {name!r}; slow down {FAST!r} or {SLOW!r}"
            )
        self.consumers[name].extra_delay_s = delay_s

    def quiesce(self, timeout: float) -> bool:
        """Wait until both consumers have read to the end offset; mark them done."""
        deadline = time.monotonic() + timeout
        probe = Consumer({**self.kafka_direct, "group.id": "probe"}, logger=log)
        try:
            end = probe.get_watermark_offsets(TopicPartition(self.topic, 0), 30)[1]
        finally:
            probe.close()
        if not wait_until(
            lambda: all(c.position >= end for c in self.consumers.values()),
            deadline - time.monotonic(),
        ):
            log.warning(
                "consumers short of offset %d: %s",
                end,
                {n: c.position for n, c in self.consumers.items()},
            )
            return False
        for name, c in self.consumers.items():
            self.context.recorder.mark(
                "consumer-done",
                consumer=name,
                channel=self.topic,
                extra={"delivered": c.delivered, "skipped_offsets": c.skipped, "end": end},
            )
        return self.audit(end, deadline)

    def audit(self, end: int, deadline: float) -> bool:
        """Read what the log still holds below `end`, straight from the broker: a
        `deliver` to LOG_AUDIT per record, then its `consumer-done` mark (False: the
        read did not reach `end` in time)."""
        rec = self.context.recorder
        reader = Consumer(
            {
                **self.kafka_direct,
                "group.id": f"{self.topic}-{LOG_AUDIT}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "enable.partition.eof": True,
            },
            logger=log,
        )
        try:
            low = reader.get_watermark_offsets(TopicPartition(self.topic, 0), 30)[0]
            if low >= end:  # retention removed everything: nothing to read, all known
                rec.mark("consumer-done", consumer=LOG_AUDIT, channel=self.topic)
                return True
            reader.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            while time.monotonic() < deadline:
                for msg in reader.consume(num_messages=500, timeout=0.2):
                    if msg.error() is not None:
                        # Nothing is written after quiescence: the partition's end is
                        # `end`, retention can only have shortened the log from its start.
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            rec.mark("consumer-done", consumer=LOG_AUDIT, channel=self.topic)
                            return True
                        continue
                    fields = message_fields(msg)
                    rec.msg("deliver", consumer=LOG_AUDIT, process=LOG_AUDIT, **fields)
            log.warning("log audit of %s did not reach offset %d in time", self.topic, end)
            return False
        finally:
            reader.close()

    def final_states(self) -> dict[str, dict[str, tuple[str, int | None]]]:
        """None: the log's contents are recorded as the consumers' deliveries."""
        return {}

    def teardown(self) -> None:
        """Stop the consumers (the topic stays for inspection)."""
        for c in self.consumers.values():
            c.stopping.set()
        for c in self.consumers.values():
            with contextlib.suppress(RuntimeError):
                c.join(10)
