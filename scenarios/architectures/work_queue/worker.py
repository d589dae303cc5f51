"""One competing consumer of the work queue: a pika process that a crash really kills.

    python -m driftlab.scenarios.architectures.work_queue.worker   # started by setup.py

It consumes the queue with manual acks and a prefetch window (`prefetch` messages may
be delivered and not yet acked), and for each message records `deliver`, does its work
(`work_ms`), writes the latest value of the key into a Redis hash *without* a version
check (updates that do not commute) and records `apply`. It acks what it has applied
about every `ack_ms` (seeded jitter of +-50%; one `multiple` ack, a common way to spare
the broker a round trip per message; 0 acks each message) and records an `ack` per
message. Killed with SIGKILL,
its unacked messages (prefetched, or applied and not yet acked) go back to the queue and
the broker redelivers them to the other consumers, which have meanwhile processed newer
versions of the same keys.

With `control_path` (replay) it first moves one command at a time (`run_stepped`,
driftlab.harness.lab.setups.stepping), then consumes as above.

Every event goes to the kernel as it is recorded (`batch_size=1`): a SIGKILL loses none.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import time
from pathlib import Path
from typing import Any

import pika
import redis

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.lab.setups.connect import NO_RETRY
from driftlab.harness.lab.setups.stepping import RUN, read_command
from driftlab.harness.lab.setups.worker_process import (
    publish_status,
    run_until_sigterm,
    worker_config,
    worker_logging,
)

log = logging.getLogger("driftlab.work_queue_worker")


class Worker:
    """The consume loop of one instance."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.rec = Recorder(cfg["run_dir"], role="worker", batch_size=1, flush_interval=1.0)
        self.redis = redis.Redis(
            host=cfg["redis_host"],
            port=cfg["redis_port"],
            password=cfg["redis_password"],
            socket_timeout=2.0,
            socket_connect_timeout=2.0,
            decode_responses=True,
            retry=NO_RETRY,  # a failed write is nacked: no hidden retries in the client
        )
        self.connection = pika.BlockingConnection(
            pika.ConnectionParameters(
                host=cfg["amqp_host"],
                port=cfg["amqp_port"],
                virtual_host=cfg["vhost"],
                credentials=pika.PlainCredentials(cfg["user"], cfg["password"]),
                heartbeat=10,
                connection_attempts=5,
                retry_delay=0.5,
            )
        )
        self.channel = self.connection.channel()
        self.channel.basic_qos(prefetch_count=int(cfg["prefetch"]))
        self.stopping = False
        self.unacked: list[dict[str, Any]] = []  # applied, not yet acked
        self.last_tag = 0
        self.last_ack = time.monotonic()
        # Each wait between acks is drawn in [ack_ms/2, 3*ack_ms/2]. A fixed period
        # phase-locks with the fault schedule: in one environment every crash of a suite
        # landed ~15 ms after an ack, held 1-2 unacked messages and reordered nothing.
        self.rng = random.Random(f"{cfg.get('seed', 0)}/{cfg['instance']}")
        self.ack_wait = self._next_ack_wait()
        self.attempts: dict[str, int] = {}
        self.handled = 0
        self.last_message = time.time()
        self.last_status = 0.0
        self.done = 0  # stepped mode: the last command carried out
        self.held: list[str] | None = None  # stepped mode: the message held, unacked

    def run(self) -> None:
        """Consume until SIGTERM (stepped first, with a control file), publishing a
        status at least every 100 ms."""
        control = self.cfg.get("control_path")
        if control:
            self.done = read_command(Path(control))["seq"]
        self.status(force=True)
        if control:
            self.run_stepped(Path(control))
        self.channel.basic_consume(self.cfg["queue"], self.on_message, auto_ack=False)
        while not self.stopping:
            self.connection.process_data_events(time_limit=0.05)
            self.ack_due()
            self.status()
        self.ack_due(force=True)
        self.status(force=True)
        self.connection.close()
        self.rec.close()

    def on_message(
        self,
        channel: Any,
        method: pika.spec.Basic.Deliver,
        _props: pika.BasicProperties,
        body: bytes,
    ) -> None:
        """Deliver, work, write Redis, ack: each step recorded."""
        fields = self.receive(method, body)
        if self.cfg["work_ms"]:
            time.sleep(self.cfg["work_ms"] / 1000)  # the job's own work
        if not self.apply(fields):
            channel.basic_nack(method.delivery_tag, requeue=True)
            time.sleep(0.5)
            return
        self.unacked.append(fields)
        self.last_tag = method.delivery_tag
        self.ack_due()
        if self.unacked:
            # Told at once, not at the next 100 ms tick: a `when: busy` crash waits for
            # a count of applied, unacked messages, and strikes the first time it reads
            # one; a count that lags only delays the crash, never misleads it.
            self.status(force=True)

    def receive(self, method: Any, body: bytes) -> dict[str, Any]:
        """Record the delivery of a message; return its history fields."""
        m = json.loads(body)
        attempt = self.attempts.get(m["msg_id"], 0) + 1
        self.attempts[m["msg_id"]] = attempt
        fields = {
            "channel": self.cfg["queue"],
            "msg_id": m["msg_id"],
            "key": m["key"],
            "value": m["value"],
            "version": m["version"],
            "consumer": self.cfg["group"],
            "process": self.cfg["instance"],
        }
        self.rec.msg(
            "deliver", attempt=attempt, extra={"redelivered": method.redelivered}, **fields
        )
        return fields

    def apply(self, fields: dict[str, Any]) -> bool:
        """Write the message's value into Redis and record it (False: Redis failed)."""
        try:
            # The latest value wins, whatever its version: the non-commuting update.
            self.redis.hset(
                self.cfg["prefix"] + fields["key"],
                mapping={"value": fields["value"], "version": fields["version"]},
            )
        except redis.RedisError as exc:
            log.warning("redis: %s; message requeued", exc)
            return False
        self.rec.msg("apply", store=self.cfg["store"], **fields)
        self.handled += 1
        self.last_message = time.time()
        return True

    def run_stepped(self, control: Path) -> None:
        """Replay: one command of the control file at a time, until `run` or SIGTERM.

        `poll` takes the queue's head message (basic.get, unacked), `apply` applies and
        acks it; `run` applies what is held and leaves stepped mode. Holding at most one
        message is the prefetch window of 1 the simulator models.
        """
        held: tuple[int, dict[str, Any]] | None = None
        while not self.stopping:
            # Also the wait between commands: it keeps the connection's heartbeats going.
            self.connection.process_data_events(time_limit=0.01)
            cmd = read_command(control)
            if cmd["seq"] <= self.done:
                continue
            if cmd["cmd"] == "poll" and held is None:
                method, _props, body = self.channel.basic_get(self.cfg["queue"], auto_ack=False)
                if method is not None:
                    held = (method.delivery_tag, self.receive(method, body))
            elif cmd["cmd"] in ("apply", RUN) and held is not None and self.apply(held[1]):
                self.channel.basic_ack(held[0])
                self.rec.msg("ack", **held[1])
                held = None
            self.done = cmd["seq"]
            self.held = [held[1]["key"], held[1]["value"]] if held else None
            self.status(force=True)
            if cmd["cmd"] == RUN:
                return

    def ack_due(self, *, force: bool = False) -> None:
        """Ack everything applied so far once the drawn wait has passed since the last ack."""
        if not self.unacked:
            return
        if not force and time.monotonic() - self.last_ack < self.ack_wait:
            return
        acked, self.unacked = self.unacked, []
        # Published before the ack leaves, as the count that a `when: busy` crash reads
        # (setup.QueueWorker): frozen after this write, the worker has not sent the ack,
        # and a kill then strands what it held; the other order could kill a worker that
        # still looks busy after its ack has reached the broker, which strands nothing.
        self.status(force=True)
        self.channel.basic_ack(self.last_tag, multiple=True)
        for fields in acked:
            self.rec.msg("ack", **fields)
        self.last_ack = time.monotonic()
        self.ack_wait = self._next_ack_wait()

    def _next_ack_wait(self) -> float:
        return self.cfg["ack_ms"] / 1000 * self.rng.uniform(0.5, 1.5)

    def status(self, *, force: bool = False) -> None:
        """Publish who runs, how many messages it handled, when it last had one and how
        many it applied and has not acked (`unacked`: what a crash now would have the
        broker deliver again, with those it was given and had not applied yet)."""
        now = time.monotonic()
        if not force and now - self.last_status < 0.1:
            return
        self.last_status = now
        publish_status(
            self.cfg["status_path"],
            {
                "instance": self.cfg["instance"],
                "handled": self.handled,
                "unacked": len(self.unacked),
                "last_message": self.last_message,
                "done": self.done,
                "held": self.held,
            },
        )


def main() -> int:
    """Run one worker instance until SIGTERM."""
    worker_logging()
    cfg = worker_config()
    worker = Worker(cfg)
    log.info("instance %s consuming %s", cfg["instance"], cfg["queue"])
    return run_until_sigterm(worker)


if __name__ == "__main__":
    sys.exit(main())
