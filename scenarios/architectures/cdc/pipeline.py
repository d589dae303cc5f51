"""The CDC pipeline a setup holds: its captured table's changes through Kafka to
consumer processes that apply them to Redis.

    captured table --(Debezium, Capture)--> Kafka topic (key-partitioned)
        --> consumer process(es) `consumer-<i>`, group `cdc-sync` --> Redis

The cdc and outbox setups each hold one; they differ in the table captured and in how
a change event names its message (`id_field`). The pipeline owns the capture, the
consumer processes and the drain at quiesce: audit the topic, then wait until every
consumer has processed and committed up to the topic's end offsets.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.base import Service, ServiceError
from driftlab.harness.lab.services.debezium import wait_slot_streaming
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.kafka_admin import TopicSpec
from driftlab.harness.lab.setups.base import Setup, SetupContext
from driftlab.harness.lab.setups.stores import State
from driftlab.scenarios.architectures.cdc.audit import audit_topic
from driftlab.scenarios.architectures.cdc.capture import Capture
from driftlab.scenarios.architectures.cdc.processes import CONSUMER, ConsumerGroup, ConsumerProcess
from driftlab.scenarios.architectures.cdc.protocol import (
    AFTER_APPLY,
    BEFORE_APPLY,
    COUNTER,
    VERSIONED,
    ConsumerConfig,
)
from driftlab.scenarios.architectures.cdc.wiring import CDC_SERVICES, Wiring

GROUP = "cdc-sync"
"""The consumers' Kafka group, the history `consumer` of what they record."""


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    """The consumers' scenario parameters (see the cdc setup's docstring)."""

    effect: str = VERSIONED
    commit: str = AFTER_APPLY
    partitions: int = 1
    consumers: int = 1
    commit_ms: int = 500
    batch: int = 100
    apply_ms: float = 0.0
    redis_timeout: float = 2.0

    @classmethod
    def from_params(cls, setup: str, p: dict[str, Any]) -> ConsumerOptions:
        """The options in a scenario's `setup_params`; a bad one is named."""
        options = cls(
            effect=p.get("effect", VERSIONED),
            commit=p.get("commit", AFTER_APPLY),
            partitions=int(p.get("partitions", 1)),
            consumers=int(p.get("consumers", 1)),
            commit_ms=int(p.get("commit_ms", 500)),
            batch=int(p.get("batch", 100)),
            apply_ms=float(p.get("apply_ms", 0)),
            redis_timeout=float(p.get("store_timeout_ms", 2000)) / 1000,
        )
        if options.effect not in (VERSIONED, COUNTER):
            raise ValueError(f"{setup}: effect {options.effect!r}; use versioned or counter")
        if options.commit not in (AFTER_APPLY, BEFORE_APPLY):
            raise ValueError(f"{setup}: commit {options.commit!r}; use after-apply or before-apply")
        if options.partitions < 1 or not 1 <= options.consumers <= options.partitions:
            raise ValueError(
                f"{setup}: partitions={options.partitions}, consumers={options.consumers}; "
                "use 1 or more partitions and between 1 and that many consumers"
            )
        return options


class CdcPipeline:
    """The capture of one table and the consumer processes that apply its changes to
    the wiring's derived store."""

    def __init__(
        self,
        ctx: SetupContext,
        wiring: Wiring,
        table_name: str,
        options: ConsumerOptions,
        id_field: str | None = None,
    ) -> None:
        self.ctx = ctx
        self.wiring = wiring
        self.id_field = id_field
        self.partitions = options.partitions
        self.capture: Capture | None = Capture(
            ctx,
            table_name,
            wiring.pg_direct,
            snapshot_mode="no_data",
            partitions=options.partitions,
        )
        self.topic = self.capture.topic
        self.consumers = self._consumers(options)

    def _consumers(self, o: ConsumerOptions) -> list[ConsumerProcess]:
        """One process per consumer, partitions dealt round-robin (not started)."""
        stack, w = self.ctx.stack, self.wiring
        kafka = kafka_client_config(stack, CONSUMER)
        redis_link = stack.link(CONSUMER, "redis")
        log_dir = self.ctx.logs
        log_dir.mkdir(parents=True, exist_ok=True)
        consumers = []
        for i in range(o.consumers):
            name = f"{CONSUMER}-{i}"
            cfg = ConsumerConfig(
                instance="",
                group=GROUP,
                topic=self.topic,
                partitions=list(range(i, o.partitions, o.consumers)),
                kafka=kafka,
                redis_host=redis_link.host,
                redis_port=redis_link.port,
                redis_password=redis_link.extra.get("password", ""),
                prefix=w.prefix,
                store=w.store,
                run_dir=str(self.ctx.work_dir),
                status_path=str(log_dir / f"{name}.status.json"),
                effect=o.effect,
                commit=o.commit,
                commit_ms=o.commit_ms,
                batch=o.batch,
                apply_ms=o.apply_ms,
                redis_timeout=o.redis_timeout,
                id_field=self.id_field,
            )
            consumers.append(ConsumerProcess(name, cfg, log_dir))
        return consumers

    def open(self) -> None:
        """Create the topic and register the connector; return once it streams."""
        assert self.capture is not None
        # A loaded machine can take a minute to start the task and its slot.
        self.capture.open(
            TopicSpec(self.topic, self.partitions), lambda c: wait_slot_streaming(c, timeout=120)
        )

    def start(self) -> None:
        """Start the consumer processes and wait until each has its partitions."""
        for c in self.consumers:
            c.start()
        for c in self.consumers:
            c.wait_healthy(60)

    def process(self, name: str) -> Service | None:
        """`consumer-<i>` or `consumer` (all of them), for crash/pause/restart faults."""
        if name == CONSUMER and self.consumers:
            return ConsumerGroup(self.consumers)
        return next((c for c in self.consumers if c.name == name), None)

    def quiesce(self, timeout: float) -> bool:
        """Audit the topic (recording `produce` events), then wait for the consumers."""
        deadline = time.monotonic() + timeout
        for c in self.consumers:  # a consumer the nemesis left down cannot drain
            if not c.is_running():
                c.start()
                c.wait_healthy(max(1.0, deadline - time.monotonic()))
        rec, w = self.ctx.recorder, self.wiring
        ends = audit_topic(
            rec, w.kafka_direct, self.topic, w.final_versions(), deadline, self.id_field
        )
        if ends is None:
            return False
        if not wait_until(
            lambda: all(_caught_up(c, ends) for c in self.consumers), deadline - time.monotonic()
        ):
            return False
        rec.mark("consumer-done", consumer=GROUP, channel=self.topic)
        return True

    def close(self) -> None:
        """Stop the consumers; drop the connector, its slot and its publication."""
        for c in self.consumers:
            with contextlib.suppress(ServiceError):
                c.stop()
        if self.capture is not None:
            self.capture.drop()


def _caught_up(consumer: ConsumerProcess, ends: dict[int, int]) -> bool:
    """Whether `consumer` has processed and committed its partitions up to `ends`."""
    status = consumer.status()
    if not status:
        return False
    position, committed = status["position"], status["committed"]
    for p in consumer.config.partitions:
        end = ends.get(p, 0)
        done = position.get(str(p), committed.get(str(p), -1))
        if end > 0 and (done < end or committed.get(str(p), -1) < end):
            return False
    return True


class PipelineSetup(Setup):
    """The half of the Setup contract that a setup whose derived store a CdcPipeline
    feeds (cdc, outbox) hands to its pipeline; `prepare` sets `wiring` and `pipeline`."""

    services = CDC_SERVICES

    def __init__(self) -> None:
        super().__init__()
        self.wiring: Wiring | None = None
        self.pipeline: CdcPipeline | None = None

    def start(self) -> None:
        """Start the consumer processes and wait until each has its partitions."""
        self._pipeline().start()

    def process(self, name: str) -> Service | None:
        """`consumer-<i>` or `consumer` (all of them), for crash/pause/restart faults."""
        return self._pipeline().process(name)

    def quiesce(self, timeout: float) -> bool:
        """Audit the captured table's topic (recording `produce` events), then wait for
        the consumers."""
        return self._pipeline().quiesce(timeout)

    def final_states(self) -> dict[str, State]:
        """The source's live rows and the derived store's keys."""
        assert self.wiring is not None
        return self.wiring.final_states()

    def teardown(self) -> None:
        """Stop the consumers; drop the connector, its slot and its publication."""
        if self.pipeline is not None:
            self.pipeline.close()

    def _pipeline(self) -> CdcPipeline:
        if self.pipeline is None:
            raise RuntimeError(f"setup {self.name!r} used before prepare()")
        return self.pipeline
