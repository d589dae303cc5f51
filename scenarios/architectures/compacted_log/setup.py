"""A log-compacted change topic, and a derived store built from it later (claim C9: the
compacted log keeps the latest value of every key, tombstones delete, so a new system
rebuilt from offset 0 equals the source).

    client -> PostgreSQL <ns>.items --(Debezium)--> Kafka topic dbz_<ns>.<ns>.items
              (cleanup.policy=compact, small segments, min.cleanable.dirty.ratio low)
    after the workload: compaction, then a new consumer reads offset 0 -> Redis `rebuilt`

Deletes are real `DELETE`s, so Debezium emits a delete event followed by a tombstone
(a null value under the row's key), which compaction keeps as the key's last record
and which the rebuild applies as a delete. Versions survive a delete and a re-insert:
every write or delete first bumps the key's row in `<ns>.key_versions` (which also
serialises one key's operations in commit order) and stores that version in the row.
The table has REPLICA IDENTITY FULL, so a delete event's `before` carries the row's
version and the delete's own version is that plus one.

Quiesce, in three steps:

1. drain: wait until every key's final version (from `key_versions`) is in the topic;
   the end offset then counts every record Debezium produced;
2. compaction: re-read the topic from offset 0 until it holds fewer records than were
   produced (the log cleaner has run), then record a `compaction` mark whose `extra`
   gives `produced`, `retained`, `tombstones` and `compacted`;
3. rebuild: a new consumer (`rebuild`, no committed offsets) reads offset 0 to the end
   and applies every record in order to a fresh Redis store `rebuilt` (`deliver` and
   `apply` events), then marks `consumer-done`.

Writes that compaction removed never reach `rebuilt`, so the lost checker reports
them as `lost-write` (the evidence of compaction in the history); the claim is about
the final state: `missing`, `stale`, `phantom` and `extra` absent. The rebuild's read
is recorded as the log audit too (a `deliver` to `LOG_AUDIT` per record, then its
`consumer-done` mark), so those lost writes say their change is not in the log.

A capture monitor follows the topic live during the workload (a delete event's version
survives only until the cleaner replaces it with its tombstone), so step 1 knows when
every change is in.

Parameters: `segment_ms` (default 500), `dirty_ratio` (`min.cleanable.dirty.ratio`,
default 0.01), `compaction_lag_ms` (`min.compaction.lag.ms`, default 2000: the
monitor's margin), `await_compaction` (default true: quiesce step 2 waits for the
cleaner; a replay, which compacts at the schedule's steps, turns it off), `linger_ms`
(the connector's producer `linger.ms`, default Kafka's: a replay sets it so a delete's
event and tombstone reach the topic as one append).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from psycopg import sql

from driftlab.harness.history.schema import LOG_AUDIT
from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.debezium import wait_slot_streaming
from driftlab.harness.lab.services.kafka_admin import TopicSpec
from driftlab.harness.lab.setups.base import Client, Setup, SetupContext
from driftlab.harness.lab.setups.connect import direct_pg_connect, redis_client
from driftlab.harness.lab.setups.stores import State
from driftlab.scenarios.architectures.cdc.capture import Capture
from driftlab.scenarios.architectures.cdc.wiring import CDC_SERVICES, Wiring
from driftlab.scenarios.architectures.compacted_log.client import CompactedClient

REBUILT = "rebuilt"
REBUILD = "rebuild"

log = logging.getLogger("driftlab.setups.compaction")


@dataclass(frozen=True, slots=True)
class Record:
    """One record of the change topic as the harness reads it."""

    offset: int
    key: str
    value: str | None  # None: a delete (event or tombstone)
    version: int | None  # None for a tombstone
    tombstone: bool


def read_record(msg: Message) -> Record:
    """The key, value and version of a Debezium record (JSON without schemas)."""
    key = str(json.loads(msg.key())["key"])
    raw = msg.value()
    if raw is None:
        return Record(msg.offset(), key, None, None, tombstone=True)
    event = json.loads(raw)
    if event["op"] == "d":
        # REPLICA IDENTITY FULL: `before` is the deleted row; the delete bumped it by one.
        return Record(msg.offset(), key, None, int(event["before"]["version"]) + 1, False)
    after = event["after"]
    return Record(msg.offset(), key, after["value"], int(after["version"]), False)


class CaptureMonitor(threading.Thread):
    """Follows the change topic live, keeping the highest version seen per key.

    It tells quiesce when every change has reached the topic. It must read as the
    records arrive: the cleaner later removes a delete event (the only record carrying
    a delete's version) in favour of its tombstone. `min.compaction.lag.ms` gives it a
    margin. It records nothing: it is the harness's instrument, not a consumer under test.
    """

    def __init__(self, setup: CompactedLog) -> None:
        super().__init__(name="capture-monitor", daemon=True)
        self.setup = setup
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self) -> None:
        """Read from offset 0 until stopped."""
        with self.setup.reader() as reader:
            while not self.stopping.is_set():
                for msg in reader.consume(num_messages=500, timeout=0.2):
                    if msg.error() is None:
                        r = read_record(msg)
                        if r.version is not None:
                            with self.lock:
                                self.seen[r.key] = max(self.seen.get(r.key, 0), r.version)

    def short_of(self, want: dict[str, int]) -> dict[str, int]:
        """The keys whose final version has not been seen yet."""
        with self.lock:
            return {k: v for k, v in want.items() if self.seen.get(k, 0) < v}


class CompactedLog(Setup):
    """PostgreSQL -> Debezium -> compacted Kafka topic -> (later) a rebuilt Redis store."""

    name = "compacted-log"
    services = CDC_SERVICES
    stores = (REBUILT,)

    def __init__(self) -> None:
        super().__init__()
        self.topic = ""
        self.table = sql.Identifier("items")
        self.versions = sql.Identifier("key_versions")
        self.wiring: Wiring | None = None
        self.capture: Capture | None = None
        self.monitor: CaptureMonitor | None = None
        self.await_compaction = True

    def prepare(self, ctx: SetupContext) -> None:
        """The run's tables, the compacted topic and the connector (streaming)."""
        self.ctx = ctx
        p = ctx.params
        segment_ms = int(p.get("segment_ms", 500))
        dirty_ratio = float(p.get("dirty_ratio", 0.01))
        lag_ms = int(p.get("compaction_lag_ms", 2000))
        self.await_compaction = bool(p.get("await_compaction", True))
        if segment_ms <= 0 or not 0 < dirty_ratio <= 1:
            raise ValueError(
                f"compacted-log: segment_ms={segment_ms}, dirty_ratio={dirty_ratio}; use a "
                "segment_ms above 0 and a dirty_ratio in (0, 1]"
            )
        self.wiring = wiring = Wiring.of(self.name, ctx, REBUILT)
        self.table = wiring.source
        self.versions = wiring.table("key_versions")
        self.create_tables()
        # A delete is two records (the event and its tombstone); a producer that lingers
        # appends them as one batch, so they share a segment and a cleaner run between
        # them cannot compact the event without its tombstone.
        linger_ms = int(p.get("linger_ms", 0))
        self.capture = Capture(
            ctx,
            "items",
            wiring.pg_direct,
            snapshot_mode="no_data",
            connector_extra={"producer.override.linger.ms": str(linger_ms)} if linger_ms else None,
        )
        self.topic = self.capture.topic
        spec = TopicSpec(
            self.topic,
            1,
            segment_ms=segment_ms,
            compact=True,
            extra={
                "min.cleanable.dirty.ratio": str(dirty_ratio),
                "min.compaction.lag.ms": str(lag_ms),
            },
        )
        self.capture.open(spec, wait_slot_streaming)

    def create_tables(self) -> None:
        """The items table (full row images in delete events) and the key versions."""
        assert self.wiring is not None
        self.wiring.create_source()
        with direct_pg_connect(self.wiring.pg_direct) as conn:
            conn.execute(sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(self.table))
            conn.execute(
                sql.SQL("CREATE TABLE {} (key text PRIMARY KEY, version bigint NOT NULL)").format(
                    self.versions
                )
            )

    def start(self) -> None:
        """Only the capture monitor runs during the workload: the derived store is built
        afterwards."""
        self.monitor = CaptureMonitor(self)
        self.monitor.start()

    def teardown(self) -> None:
        """Stop the monitor; drop the connector, its slot and its publication."""
        if self.monitor is not None:
            self.monitor.stopping.set()
            self.monitor.join(10)
        if self.capture is not None:
            self.capture.drop()

    def client(self, process: str) -> Client:
        """A client writing and deleting source rows."""
        assert self.wiring is not None
        return CompactedClient(
            self.context.recorder, process, self.wiring.pg_app, self.table, self.versions
        )

    def quiesce(self, timeout: float) -> bool:
        """Drain the change stream, wait for compaction, rebuild `rebuilt` from offset 0."""
        deadline = time.monotonic() + timeout
        end = self.drain(deadline)
        if end is None:
            return False
        retained, tombstones = self.count(end)
        while self.await_compaction and retained >= end and time.monotonic() < deadline:
            time.sleep(0.5)
            retained, tombstones = self.count(end)
        self.context.recorder.mark(
            "compaction",
            channel=self.topic,
            extra={
                "produced": end,
                "retained": retained,
                "tombstones": tombstones,
                "compacted": retained < end,
            },
        )
        self.rebuild(end)
        return True

    def final_states(self) -> dict[str, State]:
        """The source's live rows and the rebuilt store's keys."""
        assert self.wiring is not None
        return self.wiring.final_states()

    def final_versions(self) -> dict[str, int]:
        """Each key's last version (writes and deletes alike)."""
        assert self.wiring is not None
        with direct_pg_connect(self.wiring.pg_direct) as conn:
            rows = conn.execute(sql.SQL("SELECT key, version FROM {}").format(self.versions))
            return {k: int(v) for k, v in rows.fetchall()}

    def drain(self, deadline: float) -> int | None:
        """Wait until the topic holds every key's final version; its end offset then
        (None: timed out)."""
        want = self.final_versions()
        assert self.monitor is not None
        monitor = self.monitor
        if not wait_until(lambda: not monitor.short_of(want), deadline - time.monotonic()):
            short = monitor.short_of(want)
            log.warning("drain timed out; keys short of their final version: %s", short)
            return None
        with self.reader() as reader:
            return reader.get_watermark_offsets(TopicPartition(self.topic, 0), 10)[1]

    def count(self, end: int) -> tuple[int, int]:
        """(records, tombstones) the topic holds below `end` now."""
        records = tombstones = 0
        for msg in self.read_to(end):
            records += 1
            tombstones += msg.value() is None
        return records, tombstones

    def rebuild(self, end: int) -> None:
        """A new consumer applies the topic from offset 0 to `end` to a fresh store."""
        assert self.wiring is not None
        rec = self.context.recorder
        r = redis_client(self.wiring.redis_direct, timeout=5.0)
        try:
            for msg in self.read_to(end):
                record = read_record(msg)
                fields = {
                    "channel": self.topic,
                    "partition": 0,
                    "offset": record.offset,
                    "msg_id": f"{self.topic}@{record.offset}",
                    "key": record.key,
                    "value": record.value,
                    "version": record.version,
                    "consumer": REBUILD,
                    "process": REBUILD,
                }
                rec.msg("deliver", attempt=1, **fields)
                # The rebuild reads the compacted log back whole: it is the log audit too,
                # which tells a compacted-away write ("not in the log") from one skipped.
                rec.msg("deliver", **(fields | {"consumer": LOG_AUDIT, "process": LOG_AUDIT}))
                name = self.wiring.prefix + record.key
                if record.value is None:
                    r.delete(name)
                else:
                    r.hset(name, mapping={"value": record.value, "version": record.version})
                rec.msg("apply", store=REBUILT, **fields)
        finally:
            r.close()
        rec.mark("consumer-done", consumer=REBUILD, channel=self.topic)
        rec.mark("consumer-done", consumer=LOG_AUDIT, channel=self.topic)

    @contextlib.contextmanager
    def reader(self) -> Iterator[Consumer]:
        """A consumer of the topic from offset 0, without a group's offsets."""
        assert self.wiring is not None
        reader = Consumer(
            {
                **self.wiring.kafka_direct,
                "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            },
            logger=log,
        )
        reader.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        try:
            yield reader
        finally:
            reader.close()

    def read_to(self, end: int) -> list[Message]:
        """Every record from offset 0 up to `end` (compaction leaves gaps in offsets)."""
        out: list[Message] = []
        with self.reader() as reader:
            last = -1
            limit = time.monotonic() + 60
            while last < end - 1 and time.monotonic() < limit:
                for msg in reader.consume(num_messages=500, timeout=0.2):
                    if msg.error() is None and msg.offset() < end:
                        out.append(msg)
                        last = msg.offset()
                    elif msg.error() is None:
                        last = end
        return out
