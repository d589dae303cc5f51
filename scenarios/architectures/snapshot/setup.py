"""Snapshot, then stream: a new derived view starts from a consistent snapshot of the
source and applies the change stream from the position the snapshot corresponds to
(claim C10; with `align: false`, the planted bug of starting the stream later).

    loader -> PostgreSQL <ns>.items (one row per key)
    Debezium (snapshot.mode=initial) -> Kafka topic dbz_<ns>.<ns>.items:
        the snapshot's rows (op `r`), then every change committed after it
    client writes (the workload) -> PostgreSQL
    `join_s` after the start: consumer `view` reads the topic -> Redis `view`

The snapshot and its position come from Debezium: it creates the connector's
replication slot, reads the table in the transaction snapshot the slot exported at its
consistent point, and streams from that point, so every commit is either in the
snapshot or in the stream, exactly once. The preload is committed before the slot
exists and the workload starts once it does, so every write the history records is
either in the snapshot (the preload) or in the stream.

The view consumer joins late (a new system), reads the snapshot's records from
offset 0 and then:

- `align: true` (C10): goes on with the stream from the offset right after the
  snapshot: the position the snapshot corresponds to;
- `align: false` (C10-misaligned): seeks to the end of the log once the snapshot is
  loaded, as a consumer that subscribes at "latest": the changes committed between the
  snapshot and its join are never applied.

It records `deliver` and `apply` (a plain overwrite of a Redis hash: the log's order is
the source's commit order per key). Quiesce audits the topic as the CDC setup does (a
`produce` per record), waits until the view has read to the end offsets and marks it
`consumer-done`: a record it jumped over is a `lost-message` and a `poll-skip`, a
write it never applied a `lost-write`, a key it holds an older value of `stale`.

Parameters: `align` (default true), `preload` (rows loaded before the snapshot,
`k0`.., default 100: cover the workload's keys), `join_s` (default 3).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from typing import Any

import redis
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from driftlab.harness.history.events import MsgFields
from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.kafka_admin import TopicSpec
from driftlab.harness.lab.setups.base import Setup, SetupContext
from driftlab.harness.lab.setups.connect import (
    KAFKA_CLIENT_TIMEOUTS,
    direct_pg_connect,
    redis_client,
)
from driftlab.harness.lab.setups.stores import State
from driftlab.scenarios.architectures.cdc.audit import audit_topic
from driftlab.scenarios.architectures.cdc.capture import Capture
from driftlab.scenarios.architectures.cdc.client import CdcClient
from driftlab.scenarios.architectures.cdc.protocol import parse_change
from driftlab.scenarios.architectures.cdc.wiring import CDC_SERVICES, Wiring

VIEW = "view"
LOADER = "loader"

log = logging.getLogger("driftlab.setups.snapshot")


class ViewConsumer(threading.Thread):
    """The new system: loads the snapshot records, then the stream (aligned or not)."""

    def __init__(self, setup: SnapshotStream, join_s: float) -> None:
        super().__init__(name="consumer-view", daemon=True)
        self.setup = setup
        self.join_s = join_s
        self.position = 0
        self.delivered = 0
        self.jumped: tuple[int, int] | None = None  # (from, to) offsets when misaligned
        self.stopping = threading.Event()

    def run(self) -> None:
        """Wait `join_s`, then read from offset 0 until stopped."""
        if self.stopping.wait(self.join_s):
            return
        s = self.setup
        kafka = Consumer(
            {
                **s.kafka_view,
                "group.id": f"{s.topic}-{VIEW}",
                "enable.auto.commit": False,
                **KAFKA_CLIENT_TIMEOUTS,
            },
            logger=log,
        )
        kafka.assign([TopicPartition(s.topic, 0, OFFSET_BEGINNING)])
        r = redis_client(s.redis_view, timeout=5.0)
        in_snapshot = True
        try:
            while not self.stopping.is_set():
                for msg in kafka.consume(num_messages=100, timeout=0.2):
                    if msg.error() is not None:
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            log.warning("view: kafka: %s", msg.error())
                        continue
                    if msg.value() is None:
                        self.position = msg.offset() + 1
                        continue
                    snapshot_record = json.loads(msg.value()).get("op") == "r"
                    if in_snapshot and not snapshot_record:
                        in_snapshot = False
                        if not s.align:
                            self.jump(kafka, msg.offset())
                            break
                    self.apply(r, msg)
        finally:
            kafka.close()
            r.close()

    def jump(self, kafka: Consumer, first_stream_offset: int) -> None:
        """The planted bug: start the stream at the log's end, not after the snapshot."""
        _, end = kafka.get_watermark_offsets(TopicPartition(self.setup.topic, 0), timeout=10)
        self.jumped = (first_stream_offset, end)
        log.info("view: snapshot loaded; stream starts at %d, not %d", end, first_stream_offset)
        self.position = end
        kafka.assign([TopicPartition(self.setup.topic, 0, end)])

    def apply(self, r: redis.Redis, msg: Message) -> None:
        """Record the delivery, overwrite the key in Redis, record the apply."""
        change = parse_change(msg)
        assert change is not None
        fields: MsgFields = {
            **change.fields(self.setup.topic),
            "consumer": VIEW,
            "process": VIEW,
        }
        rec = self.setup.context.recorder
        rec.msg("deliver", attempt=1, **fields)
        r.hset(
            self.setup.prefix + change.key,
            mapping={"value": change.value or "", "version": change.version},
        )
        rec.msg("apply", store=VIEW, **fields)
        self.delivered += 1
        self.position = change.offset + 1


class SnapshotStream(Setup):
    """A preloaded table, Debezium's initial snapshot and stream, a late-joining view."""

    name = "snapshot-stream"
    services = CDC_SERVICES
    stores = (VIEW,)

    def __init__(self) -> None:
        super().__init__()
        self.align = True
        self.topic = ""
        self.prefix = ""  # the view's Redis key prefix
        self.kafka_view: dict[str, Any] = {}
        self.redis_view: Endpoint | None = None
        self.wiring: Wiring | None = None
        self.capture: Capture | None = None
        self.view: ViewConsumer | None = None

    def prepare(self, ctx: SetupContext) -> None:
        """Table, preload, then the connector: its slot fixes the snapshot's position."""
        self.ctx = ctx
        p = ctx.params
        self.align = bool(p.get("align", True))
        preload = int(p.get("preload", 100))
        join_s = float(p.get("join_s", 3.0))
        if preload < 0 or join_s < 0:
            raise ValueError(
                f"snapshot-stream: preload={preload}, join_s={join_s}; use values >= 0"
            )
        stack = ctx.stack
        self.wiring = wiring = Wiring.of(self.name, ctx, VIEW)
        self.prefix = wiring.prefix
        self.redis_view = stack.link("consumer", "redis")
        self.kafka_view = kafka_client_config(stack, "consumer")
        wiring.create_source()
        loader = CdcClient(wiring, ctx.recorder, LOADER)
        for i in range(preload):
            loader.write(f"k{i}", f"{LOADER}-{i}")
        loader.close()
        self.capture = Capture(ctx, "items", wiring.pg_direct, snapshot_mode="initial")
        self.topic = self.capture.topic
        self.capture.open(
            TopicSpec(self.topic, 1), lambda c: self._wait_slot_consistent(c.slot, 60)
        )
        self.view = ViewConsumer(self, join_s)

    def _wait_slot_consistent(self, slot: str, timeout: float) -> None:
        """Until the connector's slot has its consistent point (the snapshot's position)."""
        assert self.wiring is not None
        with direct_pg_connect(self.wiring.pg_direct) as conn:

            def consistent() -> bool:
                row = conn.execute(
                    "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = %s",
                    (slot,),
                ).fetchone()
                return row is not None and row[0] is not None

            why = f"slot {slot} not consistent after {timeout:.0f}s; see the connect log"
            if not wait_until(consistent, timeout):
                raise TimeoutError(f"snapshot-stream: {why}")

    def start(self) -> None:
        """Start the view's timer: it joins `join_s` later."""
        assert self.view is not None
        self.view.start()

    def client(self, process: str) -> CdcClient:
        """A client writing the source only, reading it or the view."""
        assert self.wiring is not None
        return CdcClient(self.wiring, self.context.recorder, process)

    def quiesce(self, timeout: float) -> bool:
        """Audit the topic (`produce` events), wait for the view to read to the end."""
        deadline = time.monotonic() + timeout
        assert self.wiring is not None
        want = self.wiring.final_versions()
        ends = audit_topic(
            self.context.recorder, self.wiring.kafka_direct, self.topic, want, deadline
        )
        if ends is None or self.view is None:
            return False
        end, view = ends.get(0, 0), self.view
        if not wait_until(lambda: view.position >= end, deadline - time.monotonic()):
            log.warning("view at offset %d, short of %d", view.position, end)
            return False
        extra = {"delivered": self.view.delivered, "end": end, "aligned": self.align}
        if self.view.jumped is not None:
            extra["jumped_from"], extra["jumped_to"] = self.view.jumped
        self.context.recorder.mark("consumer-done", consumer=VIEW, channel=self.topic, extra=extra)
        return True

    def final_states(self) -> dict[str, State]:
        """The source's live rows and the view's keys."""
        assert self.wiring is not None
        return self.wiring.final_states()

    def teardown(self) -> None:
        """Stop the view; drop the connector, its slot and its publication."""
        if self.view is not None:
            self.view.stopping.set()
            with contextlib.suppress(RuntimeError):
                self.view.join(10)
        if self.capture is not None:
            self.capture.drop()
