"""Change data capture: the application writes PostgreSQL only; Debezium carries every
committed change through Kafka to consumer processes that apply it to Redis.

    client -> PostgreSQL <ns>.items --(pgoutput, Debezium on Kafka Connect)--> Kafka topic
    dbz_<ns>.<ns>.items (key-partitioned) --> consumer process(es) --> Redis (cache | counter)

This is the log-based pipeline of DDIA chapter 11 (claims C3, C4, C5, C8, C15): the
database's commit order becomes the log's order per key, and the consumers' guarantees
depend on when they commit offsets and whether their effect is idempotent.

Parameters (scenario `setup_params`):

- `effect`: `versioned` (default: idempotent, a newer source version overwrites, an older
  one is skipped; store `cache`) or `counter` (INCR per change, not idempotent; store
  `counter`). With `counter` a client's write is an increment of the source row
  (`f = increment`, value = the new total), as docs/checkers.md describes counters.
- `commit`: `after-apply` (default) or `before-apply` (the planted bug of C4).
- `commit_ms`: how often an after-apply consumer commits (default 500).
- `partitions`: partitions of the change topic (default 1); Debezium keys events by the
  row's primary key, so a key always lands on one partition.
- `consumers`: consumer processes (default 1), partitions dealt round-robin; with as
  many consumers as partitions each owns one. They are named `consumer-0`, ... and
  together `consumer`: a `crash`, `pause` or `restart` fault targets either.
- `batch`, `apply_ms`: messages per poll (default 100) and the consumer's own work per
  message in ms (default 0).
- `store_timeout_ms`: the consumer's Redis timeout (default 2000); a Toxiproxy `cut`
  stalls the link rather than refusing it, so only a timeout shorter than the cut
  makes the consumer notice.

Every consumer reaches Kafka through the Toxiproxy link `consumer->kafka` and Redis
through `consumer->redis` (a `cut` fault may target `consumer->redis`); Connect reaches
PostgreSQL through `connect->postgres`; the application through `app->postgres`.

Each run has its own table, topic, connector, replication slot, publication and Debezium
server name (the topic prefix `dbz_<ns>`, which names its JMX metrics: a killed run's
connector, still registered, once made every later run's connector fail to register
them); teardown removes the connector, the slot and the publication so a
shared PostgreSQL keeps no WAL for finished runs (the table and topic stay).

Quiesce, then `produce` events: the source's final version of every key is read; an
auditor (a fresh Kafka consumer, no group) reads the topic from offset 0 until every key
has reached its final version and the end offsets, and records one `produce` per change
event (time: the record's Kafka timestamp; partition, offset; `msg_id` `<lsn>:<key>`)
and, being the log read back, a `deliver` of it to the log audit (`LOG_AUDIT`), with
its `consumer-done` mark once it has read to the end offsets.
Then it waits until every consumer has processed and committed up to those end offsets
and records `consumer-done` for the group.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from psycopg import sql

from harness.architectures.cdc.capture import Capture
from harness.architectures.cdc.client import CdcClient
from harness.architectures.cdc.processes import CONSUMER, ConsumerGroup, ConsumerProcess
from harness.architectures.cdc.protocol import (
    AFTER_APPLY,
    BEFORE_APPLY,
    COUNTER,
    VERSIONED,
    ConsumerConfig,
    parse_change,
)
from harness.history.schema import LOG_AUDIT, SOURCE_STORE
from harness.services.base import Endpoint, Service, ServiceError
from harness.services.debezium import wait_slot_streaming
from harness.services.kafka_admin import TopicSpec
from harness.services.stack_protocol import ServiceStack
from harness.setups.base import Setup, SetupContext
from harness.setups.connect import (
    direct_pg_connect,
    endpoint,
    pg_conninfo,
    redis_client,
)
from harness.setups.stores import CACHE

log = logging.getLogger("driftlab.setups.cdc")

COUNTER_STORE = "counter"
GROUP = "cdc-sync"


class Cdc(Setup):
    """PostgreSQL -> Debezium -> Kafka -> consumer processes -> Redis."""

    name = "cdc"
    services = ("postgres", "redis", "kafka", "connect")
    table_name = "items"
    id_field: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.effect = VERSIONED
        self.store = CACHE
        self.stores = (CACHE,)
        self.table = sql.Identifier("items")
        self.topic = ""
        self.prefix = ""
        self.pg_app = self.pg_direct = ""
        self.bootstrap_direct = ""
        self.capture: Capture | None = None
        self.consumers: list[ConsumerProcess] = []
        self._redis_app: Endpoint | None = None
        self._redis_direct: Endpoint | None = None

    # --- lifecycle -------------------------------------------------------------------

    def prepare(self, ctx: SetupContext) -> None:
        """The run's table, topic, connector (streaming) and consumer processes (not
        started yet)."""
        self.ctx = ctx
        p = ctx.params
        self.effect = p.get("effect", VERSIONED)
        if self.effect not in (VERSIONED, COUNTER):
            raise ValueError(f"{self.name}: effect {self.effect!r}; use versioned or counter")
        commit = p.get("commit", AFTER_APPLY)
        if commit not in (AFTER_APPLY, BEFORE_APPLY):
            raise ValueError(f"{self.name}: commit {commit!r}; use after-apply or before-apply")
        partitions = int(p.get("partitions", 1))
        n_consumers = int(p.get("consumers", 1))
        if partitions < 1 or not 1 <= n_consumers <= partitions:
            raise ValueError(
                f"{self.name}: partitions={partitions}, consumers={n_consumers}; "
                "use 1 or more partitions and between 1 and that many consumers"
            )
        self.store = COUNTER_STORE if self.effect == COUNTER else CACHE
        self.stores = (self.store,)
        stack = ctx.stack
        ns = ctx.namespace
        self.table = sql.Identifier(ns, self.table_name)
        self.prefix = f"{ns}:{self.store}:"
        self.wire_stores(stack)
        self.create_tables()
        self.capture = Capture(
            ctx, self.table_name, self.pg_direct, snapshot_mode="no_data", partitions=partitions
        )
        self.topic = self.capture.topic
        # A loaded machine can take a minute to start the task and its slot.
        self.capture.open(
            TopicSpec(self.topic, partitions), lambda c: wait_slot_streaming(c, timeout=120)
        )
        bootstrap = stack["kafka"].link(stack.links, CONSUMER)
        redis_link = stack.link(CONSUMER, "redis")
        log_dir = ctx.logs
        log_dir.mkdir(parents=True, exist_ok=True)
        self.consumers = []
        for i in range(n_consumers):
            name = f"{CONSUMER}-{i}"
            cfg = ConsumerConfig(
                instance="",
                group=GROUP,
                topic=self.topic,
                partitions=list(range(i, partitions, n_consumers)),
                bootstrap=bootstrap,
                redis_host=redis_link.host,
                redis_port=redis_link.port,
                redis_password=redis_link.extra.get("password", ""),
                prefix=self.prefix,
                store=self.store,
                run_dir=str(ctx.work_dir),
                status_path=str(log_dir / f"{name}.status.json"),
                effect=self.effect,
                commit=commit,
                commit_ms=int(p.get("commit_ms", 500)),
                batch=int(p.get("batch", 100)),
                apply_ms=float(p.get("apply_ms", 0)),
                redis_timeout=float(p.get("store_timeout_ms", 2000)) / 1000,
                id_field=self.id_field,
            )
            self.consumers.append(ConsumerProcess(name, cfg, log_dir))

    def wire_stores(self, stack: ServiceStack) -> None:
        """The addresses of PostgreSQL, Redis and Kafka: the application's through its
        links, the harness's own (setup, final reads) direct."""
        self.pg_app = pg_conninfo(endpoint(stack, "postgres"))
        self.pg_direct = pg_conninfo(endpoint(stack, "postgres", direct=True))
        self._redis_app = endpoint(stack, "redis")
        self._redis_direct = endpoint(stack, "redis", direct=True)
        self.bootstrap_direct = stack["kafka"].bootstrap_servers

    def create_tables(self) -> None:
        """The source table: a per-key `version` bumped by every write."""
        with direct_pg_connect(self.pg_direct) as conn:
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    sql.Identifier(self.context.namespace)
                )
            )
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (key text PRIMARY KEY, value text, version bigint NOT NULL)"
                ).format(self.table)
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

    def client(self, process: str) -> CdcClient:
        """A client writing the source only."""
        return CdcClient(self, process)

    def quiesce(self, timeout: float) -> bool:
        """Audit the topic (recording `produce` events), then wait for the consumers."""
        deadline = time.monotonic() + timeout
        for c in self.consumers:  # a consumer the nemesis left down cannot drain
            if not c.is_running():
                c.start()
                c.wait_healthy(max(1.0, deadline - time.monotonic()))
        ends = self.audit(deadline)
        if ends is None:
            return False
        while time.monotonic() < deadline:
            if all(self._caught_up(c, ends) for c in self.consumers):
                self.context.recorder.mark("consumer-done", consumer=GROUP, channel=self.topic)
                return True
            time.sleep(0.1)
        return False

    def final_states(self) -> dict[str, dict[str, tuple[str, int | None]]]:
        """The source's live rows and the derived store's keys."""
        with direct_pg_connect(self.pg_direct) as conn:
            rows = conn.execute(
                sql.SQL("SELECT key, value, version FROM {} WHERE value IS NOT NULL").format(
                    self.source_table()
                )
            ).fetchall()
        derived: dict[str, tuple[str, int | None]] = {}
        r = redis_client(self._redis_direct, timeout=5.0)
        try:
            for full in r.scan_iter(match=f"{self.prefix}*", count=500):
                key = full[len(self.prefix) :]
                if self.effect == COUNTER:
                    derived[key] = (r.get(full), None)
                else:
                    h = r.hgetall(full)
                    if "value" in h:
                        derived[key] = (h["value"], int(h["version"]))
        finally:
            r.close()
        return {SOURCE_STORE: {k: (v, ver) for k, v, ver in rows}, self.store: derived}

    def teardown(self) -> None:
        """Stop the consumers; drop the connector, its slot and its publication."""
        for c in self.consumers:
            with contextlib.suppress(ServiceError):
                c.stop()
        if self.capture is not None:
            self.capture.drop()

    # --- internals -------------------------------------------------------------------

    def source_table(self) -> sql.Identifier:
        """The table holding the source's final state."""
        return self.table

    def final_versions(self) -> dict[str, int]:
        """Each key's version in the source now (tombstones included)."""
        with direct_pg_connect(self.pg_direct) as conn:
            rows = conn.execute(
                sql.SQL("SELECT key, version FROM {}").format(self.source_table())
            ).fetchall()
        return {k: int(v) for k, v in rows}

    def audit(self, deadline: float) -> dict[int, int] | None:
        """Read the topic from 0 until every key's final version and the end offsets;
        record a `produce` per change event. Returns the end offsets (None: timed out)."""
        want = self.final_versions()
        reader = Consumer(
            {
                "bootstrap.servers": self.bootstrap_direct,
                "group.id": f"auditor-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            },
            logger=log,
        )
        n = len(reader.list_topics(self.topic, timeout=10).topics[self.topic].partitions)
        reader.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(n)])
        seen: dict[str, int] = {}
        position = dict.fromkeys(range(n), 0)
        ends: dict[int, int] | None = None
        rec = self.context.recorder
        try:
            while time.monotonic() < deadline:
                for msg in reader.consume(num_messages=500, timeout=0.2):
                    if msg.error() is not None:
                        continue
                    position[msg.partition()] = msg.offset() + 1
                    change = parse_change(msg, self.id_field)
                    if change is None:
                        continue
                    seen[change.key] = max(seen.get(change.key, 0), change.version)
                    record = change.fields(self.topic)
                    rec.msg("produce", **record, time=msg.timestamp()[1] * 1_000_000)
                    # The same read is the log audit: this change is in the log now.
                    rec.msg("deliver", **record, consumer=LOG_AUDIT, process=LOG_AUDIT)
                if ends is None and all(seen.get(k, 0) >= v for k, v in want.items()):
                    # Every change is in: what the topic holds now is all there will be.
                    ends = {
                        p: reader.get_watermark_offsets(TopicPartition(self.topic, p), 10)[1]
                        for p in range(n)
                    }
                if ends is not None and all(position[p] >= e for p, e in ends.items()):
                    rec.mark("consumer-done", consumer=LOG_AUDIT, channel=self.topic)
                    return ends
            missing = {k: v for k, v in want.items() if seen.get(k, 0) < v}
            log.warning("audit timed out; keys short of their final version: %s", missing)
            return None
        finally:
            reader.close()

    def _caught_up(self, consumer: ConsumerProcess, ends: dict[int, int]) -> bool:
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
