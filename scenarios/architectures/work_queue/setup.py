"""Work queue: an AMQP queue on RabbitMQ with competing consumers and manual acks (C7).

The application publishes every write of a key as a message (persistent, confirmed by
the broker) carrying a per-key version that the producer assigns (a counter per key;
one key's publishes are serialized, so the queue holds each key's versions in order).
`workers` consumer processes (`driftlab.scenarios.architectures.work_queue.worker`, named
`worker-0`,
`worker-1`, ...) compete for the queue with a prefetch window: each holds up to
`prefetch` delivered, unacked messages, works `work_ms` on each, writes the key's
latest value into Redis without a version check, and acks what it applied about every
`ack_ms` (jittered, seeded). A crash fault on
`worker-<n>` SIGKILLs it: the broker redelivers its unacked messages to the others,
after newer versions of the same keys, and the older value overwrites the newer one
(DDIA Figure 11-2). Healing starts a new instance of the worker.

Parameters (scenario `setup.params`): `workers` (default 3), `prefetch` (default 10),
`work_ms` (default 10), `ack_ms` (default 0: ack each message as it is applied),
`busy_unacked` (default 1): how many applied, unacked messages make a worker busy for a
`when: busy` crash (QueueWorker).

History: the application records `write` ops on the source (its intended state, with
the version) and a `produce` per confirmed publish; each worker instance records
`deliver`, `apply` (store `cache`) and `ack` to its own segment, as consumer `workers`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pika
import redis

from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.base import Endpoint, HoldsWhenBusy
from driftlab.harness.lab.setups.base import Client, Setup, SetupContext
from driftlab.harness.lab.setups.connect import AMQP_HEARTBEAT_S, endpoint, redis_client
from driftlab.harness.lab.setups.stores import CACHE, redis_hashes
from driftlab.harness.lab.setups.worker_process import WorkerProcess

GROUP = "workers"
WORKER_LINK = "worker"
"""The client name of the workers' links: `worker->rabbitmq`, `worker->redis`."""


def amqp_parameters(ep: Endpoint) -> pika.ConnectionParameters:
    """The application's AMQP connection to `ep`: one attempt, short socket timeouts and
    a heartbeat that ends a call stalled by a cut link (AMQP_HEARTBEAT_S)."""
    return pika.ConnectionParameters(
        host=ep.host,
        port=ep.port,
        virtual_host=ep.extra.get("vhost", "/"),
        credentials=pika.PlainCredentials(ep.extra["user"], ep.extra["password"]),
        connection_attempts=1,
        socket_timeout=3,
        blocked_connection_timeout=5,
        heartbeat=AMQP_HEARTBEAT_S,
    )


class QueueWorker(HoldsWhenBusy, WorkerProcess):
    """One worker process of the queue; a `when: busy` crash holds it frozen while it
    has applied at least `busy_unacked` messages it has not acked."""

    def __init__(
        self,
        name: str,
        config: dict[str, Any],
        run_dir: Path,
        status_dir: Path,
        busy_unacked: int,
    ) -> None:
        super().__init__(
            name, "driftlab.scenarios.architectures.work_queue.worker", config, run_dir, status_dir
        )
        self.busy_unacked = busy_unacked

    def busy(self) -> bool:
        """Whether this instance, by its last status, holds `busy_unacked` or more applied,
        unacked messages: a kill now has the broker deliver them again after the newer
        versions of their keys the other workers took meanwhile (the older the oldest of
        them, the surer). A worker that acked them all is not: it publishes its count
        before an ack leaves (worker.Worker.ack_due), so a frozen one seen busy has not
        sent it. A dead instance's status keeps what it held when it died."""
        status = self.status()
        return (
            status.get("instance") == self.instance
            and int(status.get("unacked", 0)) >= self.busy_unacked
            and self.is_running()
        )


class WorkQueue(Setup):
    """RabbitMQ queue, competing consumer processes, Redis as the derived store."""

    name = "work-queue"
    services = ("rabbitmq", "redis")
    stores = (CACHE,)

    def __init__(self) -> None:
        super().__init__()
        self.workers: dict[str, QueueWorker] = {}
        self.queue = ""
        self.prefix = ""
        self._amqp_app: Endpoint | None = None
        self._amqp_direct: Endpoint | None = None
        self._redis_direct: Endpoint | None = None
        self._versions: dict[str, int] = defaultdict(int)
        self._latest: dict[str, tuple[str, int]] = {}
        self._key_locks: dict[str, threading.Lock] = defaultdict(threading.Lock)
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------

    def prepare(self, ctx: SetupContext) -> None:
        """Declare the run's durable queue and configure (not start) the workers."""
        self.ctx = ctx
        p = ctx.params
        count = int(p.get("workers", 3))
        prefetch = int(p.get("prefetch", 10))
        work_ms = float(p.get("work_ms", 10))
        ack_ms = float(p.get("ack_ms", 0))
        busy_unacked = int(p.get("busy_unacked", 1))
        if count < 1 or prefetch < 1 or work_ms < 0 or ack_ms < 0:
            raise ValueError(
                "work-queue: workers and prefetch must be >= 1, work_ms and ack_ms >= 0; "
                f"got workers={count}, prefetch={prefetch}, work_ms={work_ms}, ack_ms={ack_ms}"
            )
        if not 1 <= busy_unacked <= prefetch:
            # A worker never holds more than its prefetch: it would never be busy.
            raise ValueError(
                f"work-queue: busy_unacked must be in 1..prefetch ({prefetch}); got {busy_unacked}"
            )
        self.queue = f"{ctx.namespace}.work"
        self.prefix = f"{ctx.namespace}:"
        self._amqp_app = endpoint(ctx.stack, "rabbitmq")
        self._amqp_direct = endpoint(ctx.stack, "rabbitmq", direct=True)
        self._redis_direct = endpoint(ctx.stack, "redis", direct=True)
        conn = pika.BlockingConnection(amqp_parameters(self._amqp_direct))
        try:
            conn.channel().queue_declare(self.queue, durable=True)
        finally:
            conn.close()
        amqp = ctx.stack.link(WORKER_LINK, "rabbitmq")
        red = ctx.stack.link(WORKER_LINK, "redis")
        config = {
            "queue": self.queue,
            "group": GROUP,
            "store": CACHE,
            "prefix": self.prefix,
            "prefetch": prefetch,
            "work_ms": work_ms,
            "ack_ms": ack_ms,
            "seed": ctx.seed,
            "amqp_host": amqp.host,
            "amqp_port": amqp.port,
            "vhost": amqp.extra.get("vhost", "/"),
            "user": amqp.extra["user"],
            "password": amqp.extra["password"],
            "redis_host": red.host,
            "redis_port": red.port,
            "redis_password": red.extra.get("password"),
        }
        status_dir = ctx.logs
        for i in range(count):
            name = f"worker-{i}"
            self.workers[name] = QueueWorker(
                name, dict(config), ctx.work_dir, status_dir, busy_unacked
            )

    def start(self) -> None:
        """Start every worker and wait until each consumes."""
        for w in self.workers.values():
            w.start()
        for w in self.workers.values():
            w.wait_healthy()

    def process(self, name: str) -> QueueWorker | None:
        """`worker-<n>`: the target of crash, pause and restart faults."""
        return self.workers.get(name)

    def client(self, process: str) -> WorkQueueClient:
        """A producer with its own AMQP connection (pika is not thread-safe)."""
        return WorkQueueClient(self, process)

    def quiesce(self, timeout: float) -> bool:
        """Wait until the queue is empty, the broker counts only the live workers'
        consumers (a killed one's unacked messages are back), and every worker has been
        idle for a second."""

        def drained() -> bool:
            declared = self.depth()
            statuses = [w.status() for w in self.workers.values()]
            idle = all(
                w.is_running() and time.time() - s.get("last_message", 0) > 1.0
                for w, s in zip(self.workers.values(), statuses, strict=True)
            )
            # A killed worker's consumer counts until the broker sees its connection
            # close; only then are its unacked messages back in the queue.
            settled = declared.consumer_count == len(self.workers)
            return declared.message_count == 0 and idle and settled

        if not wait_until(drained, timeout, interval=0.2):
            return False
        self.context.recorder.mark("consumer-done", consumer=GROUP, channel=self.queue)
        return True

    def depth(self) -> pika.spec.Queue.DeclareOk:
        """The queue as the broker counts it now (`message_count`: ready messages,
        `consumer_count`), asked over a connection of its own."""
        assert self._amqp_direct is not None
        conn = pika.BlockingConnection(amqp_parameters(self._amqp_direct))
        try:
            return conn.channel().queue_declare(self.queue, passive=True).method
        finally:
            conn.close()

    def final_states(self) -> dict[str, dict[str, tuple[str, int | None]]]:
        """The producer's latest confirmed write per key, and Redis's hashes."""
        with self._lock:
            source: dict[str, tuple[str, int | None]] = dict(self._latest)
        return {SOURCE_STORE: source, CACHE: redis_hashes(self._redis_direct, self.prefix)}

    def teardown(self) -> None:
        """Stop the workers (gracefully: they finish the message in hand)."""
        for w in self.workers.values():
            w.stop()

    # -- used by clients -----------------------------------------------------------

    def latest(self, key: str) -> tuple[str, int] | None:
        """The producer's latest confirmed write of `key` (the source's view)."""
        with self._lock:
            return self._latest.get(key)

    def publish(self, channel: Any, key: str, value: str) -> int:
        """Publish the next version of `key`, confirmed; returns the version.

        One key's publishes are serialized so the queue holds its versions in order:
        any reordering a consumer sees comes from the consumers, not the producer.
        """
        with self._key_locks[key]:
            version = self._versions[key] + 1
            body = {
                "msg_id": f"{self.context.namespace}:{key}:{version}",
                "key": key,
                "value": value,
                "version": version,
            }
            channel.basic_publish(
                "",
                self.queue,
                json.dumps(body).encode(),
                pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent),
                mandatory=True,
            )
            self._versions[key] = version
            with self._lock:
                self._latest[key] = (value, version)
            self.context.recorder.msg("produce", channel=self.queue, **body)
        return version


class WorkQueueClient(Client):
    """The application: publishes writes to the queue; reads Redis."""

    def __init__(self, setup: WorkQueue, process: str) -> None:
        super().__init__(setup.context.recorder, process)
        self.setup = setup
        self._conn: pika.BlockingConnection | None = None
        self._channel: Any = None
        self._redis: redis.Redis | None = None

    def write(self, key: str, value: str) -> None:
        """Publish the write (a confirmed, persistent message) and record it."""
        op = self.rec.invoke(self.process, "write", key=key, value=value, store=SOURCE_STORE)
        try:
            version = self.setup.publish(self._open(), key, value)
        except pika.exceptions.UnroutableError as exc:
            self.rec.complete(op, "fail", error=f"unroutable: {exc}"[:300])
            return
        except (pika.exceptions.AMQPError, OSError) as exc:
            self.close()
            # A lost connection after the publish leaves its fate unknown.
            self.rec.complete(op, "info", error=str(exc)[:300] or type(exc).__name__)
            return
        self.rec.complete(op, "ok", version=version)

    def delete(self, key: str) -> None:
        """Deletes are not part of this setup's workload."""
        raise ValueError("work-queue: the workload's mix must not contain deletes")

    def read(self, key: str, store: str) -> None:
        """Read the key's hash from Redis (the only derived store)."""
        if store == SOURCE_STORE:
            latest = self.setup.latest(key)
            op = self.rec.invoke(self.process, "read", key=key, store=store)
            value, version = latest if latest else (None, None)
            self.rec.complete(op, "ok", value=value, version=version)
            return
        op = self.rec.invoke(self.process, "read", key=key, store=store)
        if self._redis is None:
            self._redis = redis_client(endpoint(self.setup.context.stack, "redis"))
        try:
            h = self._redis.hgetall(self.setup.prefix + key)
        except redis.RedisError as exc:
            self.rec.complete(op, "fail", error=str(exc)[:300])
            return
        if h:
            self.rec.complete(op, "ok", value=h["value"], version=int(h["version"]))
        else:
            self.rec.complete(op, "ok")

    def close(self) -> None:
        """Close the AMQP and Redis connections, ignoring errors."""
        if self._redis is not None:
            with contextlib.suppress(Exception):
                self._redis.close()
            self._redis = None
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None
        self._channel = None

    def _open(self) -> Any:
        if self._channel is None or not self._channel.is_open:
            assert self.setup._amqp_app is not None
            self._conn = pika.BlockingConnection(amqp_parameters(self.setup._amqp_app))
            self._channel = self._conn.channel()
            self._channel.confirm_delivery()
        return self._channel
