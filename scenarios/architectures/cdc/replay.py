"""Replay of `cdc`, `cdc-commit-before` and `cdc-counter` (and, given the outbox setup,
`outbox`): PostgreSQL -> Debezium -> Kafka -> the stepped consumer process -> Redis.

The driver steps a setup's `CdcPipeline`; any setup that holds one (`PipelineSetup`)
is replayed by it, given as `setup_class`."""

from __future__ import annotations

import time
import uuid
from typing import Any, Protocol, cast

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from driftlab.harness.lab.explore.schedule import Action, Step, describe
from driftlab.harness.lab.replay.driver import ReplayDriver, Stepped, kill, refuse
from driftlab.harness.lab.replay.turnstile import ReplayError, Turnstile
from driftlab.harness.lab.services.toxiproxy import link_name
from driftlab.harness.lab.setups.base import Setup, SetupContext
from driftlab.harness.lab.setups.stepping import RUN
from driftlab.scenarios.architectures.cdc.pipeline import CdcPipeline
from driftlab.scenarios.architectures.cdc.processes import CONSUMER
from driftlab.scenarios.architectures.cdc.protocol import AFTER_APPLY, VERSIONED, parse_change
from driftlab.scenarios.architectures.cdc.setup import Cdc

REDIS_LINK = link_name(CONSUMER, "redis")


class PipelineSetup(Protocol):
    """What the driver needs of its setup beyond `Setup`: the `CdcPipeline` its changes
    go through (None before prepare)."""

    pipeline: CdcPipeline | None


class CdcDriver(ReplayDriver):
    """`cdc`, `cdc-commit-before`, `cdc-counter`: one stepped consumer `g`.

    The one consumer `g` is the OS process `consumer-0` in stepped mode: it receives,
    applies and commits only when its control file says so (cdc_consumer.py), and the
    driver waits until it reports each command done. A `db-write` returns once Debezium
    has captured the change into Kafka, so a later `poll` finds it; the poll goes to the
    real partition of that change (Kafka's partitioner is not the simulator's crc32) and
    must receive the scheduled change. `crash` is a SIGKILL, `restart` a new instance,
    `partition` of `g->cache` cuts the Toxiproxy link `consumer->redis` (the simulator
    never applies while it is cut) and `heal` restores it.
    """

    setup_class: type[Setup] = Cdc
    """The real setup whose pipeline the driver steps."""

    def __init__(self, turnstile: Turnstile, params: dict[str, Any]) -> None:
        super().__init__(turnstile, params)
        self.setup = self.setup_class()
        self.params = {
            "partitions": int(params.get("partitions", 2)),
            "commit": params.get("policy", AFTER_APPLY),
            "effect": params.get("effect", VERSIONED),
        }
        # (key, value) -> (partition, offset): a counter's values repeat across keys
        self.captured: dict[tuple[str | None, str | None], tuple[int, int]] = {}
        self.reader: Consumer | None = None
        self.stepped: Stepped | None = None
        self.cuts: dict[str, str] = {}  # simulated link -> fault id of its cut

    def start(self, ctx: SetupContext) -> None:
        """Start the prepared pipeline with its consumer in stepped mode, and a capture
        reader."""
        ctx.steps.add(self.turnstile.hook)
        consumer = self.pipeline.consumers[0]
        self.stepped = Stepped(consumer, ctx.logs, self.turnstile.timeout)
        consumer.config.control_path = self.stepped.path
        self.setup.start()
        self.reader = Consumer(
            {
                **self.pipeline.wiring.kafka_direct,
                "group.id": f"replay-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            }
        )
        topic = self.pipeline.topic
        self.reader.assign(
            [
                TopicPartition(topic, p, OFFSET_BEGINNING)
                for p in range(int(self.params["partitions"]))
            ]
        )

    @property
    def pipeline(self) -> CdcPipeline:
        """The prepared setup's pipeline."""
        pipeline = cast(PipelineSetup, self.setup).pipeline
        if pipeline is None:
            raise ReplayError(f"{self.setup.name}: the setup is not prepared")
        return pipeline

    def step(self, index: int, step: Step) -> None:
        """db-write, db-delete, poll, apply, commit, crash or restart of `g`."""
        what = f"step {index} ({describe(step)})"
        assert self.stepped is not None
        match step.action:
            case Action.DB_WRITE | Action.DB_DELETE if step.key and step.actor:
                client = self.clients[step.actor]
                if step.action == Action.DB_WRITE and step.value:
                    client.write(step.key, step.value)
                else:
                    client.delete(step.key)
                self._await_capture((step.key, step.value), what)
            case Action.POLL:
                partition, offset = self.captured.get((step.key, step.value), (-1, -1))
                if partition < 0:
                    raise ReplayError(f"{what}: {step.value!r} was never captured into Kafka")
                status = self.stepped.send(what, "poll", partition=partition)
                received = status.get("received") or []
                if not received or received[-1][2] != step.value:
                    raise ReplayError(
                        f"{what}: the consumer received {received[-1:] or 'nothing'} from "
                        f"partition {partition}, not {step.value!r} at offset {offset}"
                    )
            case Action.APPLY:
                self.stepped.send(what, "apply")
            case Action.COMMIT:
                self.stepped.send(what, "commit")
            case Action.CRASH:
                kill(self.pipeline.consumers[0], what)
            case Action.RESTART:
                self.pipeline.consumers[0].start()
                self.pipeline.consumers[0].wait_healthy(60)
            case Action.PARTITION if step.target and step.target not in self.cuts:
                # The simulated `g->cache` (or `g->counter`) is the consumer's Redis link.
                self.setup.context.stack.links.cut(REDIS_LINK)
                rec = self.setup.context.recorder
                self.cuts[step.target] = rec.fault_start("partition", REDIS_LINK)
            case Action.HEAL:
                self._heal()
            case _:
                raise refuse(what, "cdc", step)

    def _await_capture(self, change: tuple[str | None, str | None], what: str) -> None:
        """Read the topic until `change` (key, value) is in it."""
        assert self.reader is not None
        deadline = time.monotonic() + 120  # Debezium on a loaded machine
        while change not in self.captured:
            if time.monotonic() > deadline:
                raise ReplayError(f"{what}: Debezium did not capture it within 120 s")
            for msg in self.reader.consume(num_messages=10, timeout=0.2):
                got = None if msg.error() else parse_change(msg, self.pipeline.id_field)
                if got is not None:
                    self.captured[(got.key, got.value)] = (got.partition, got.offset)

    def _heal(self) -> None:
        if self.cuts:
            self.setup.context.stack.links.heal(REDIS_LINK)
        for fault_id in self.cuts.values():
            self.setup.context.recorder.fault_stop(fault_id)
        self.cuts.clear()

    def finish(self) -> None:
        """Heal, and let the consumer run freely (a crashed one restarts so at quiesce)."""
        super().finish()
        self._heal()
        consumer = self.pipeline.consumers[0]
        if consumer.is_running() and self.stepped is not None:
            self.stepped.send("quiesce", RUN)
        consumer.config.control_path = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None
