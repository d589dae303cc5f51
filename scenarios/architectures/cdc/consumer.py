"""The CDC consumer: one OS process reading Debezium change events from Kafka and
applying them to Redis, so that a crash is a real SIGKILL that loses what it had not
committed.

    python -P scenarios/architectures/cdc/consumer.py    # configuration in $DRIFTLAB_CONSUMER
    (JSON)

The parent (`driftlab.scenarios.architectures.cdc.processes.ConsumerProcess`) starts it, kills it
and restarts it.
It reads its partitions by explicit assignment (no group rebalances to wait out after a
crash) from the offsets its group committed, with `enable.auto.commit=false`, and
records to its own history segment (role `consumer`) one event per step:
`deliver` (with `attempt` counting this instance's deliveries of the message), then
`apply` or `skip` on its store, and `commit` after each offset commit.

- `commit`: `after-apply` commits every `commit_ms` once the messages are applied
  (at-least-once); `before-apply` commits each polled batch before applying it (the
  planted bug of claim C4: a crash in between loses the rest of the batch).
- `effect`: `versioned` writes a Redis hash only if the change's source version is newer
  than the stored one (a Lua script, atomic in Redis; else a `skip`), deletes keep the
  version as a tombstone; `counter` INCRs a counter per change (not idempotent), and
  the `apply` event carries the new total as its value.
- `control_path` (replay): the consumer moves only when told. The parent writes a
  command there atomically (`{"seq": n, "cmd": "poll", "partition": p}`, `apply`,
  `commit`, or `run` to leave stepped mode), and the consumer publishes `done: n` in its
  status once the step is over, so `driftlab replay` forces one step at a time.
- A failed Redis call (a cut link) makes the consumer seek back to its last committed
  offsets and process again from there after a back-off: the at-least-once retry.
- An offset commit that fails, or gets no answer within KAFKA_COMMIT_TIMEOUT_S (a cut
  `consumer->kafka`: librdkafka alone would wait for the heal), is retried: `after-apply`
  at its next turn, `before-apply` by the same seek back (a batch is applied only once
  its commit is known). A commit given up on that lands after all is recorded when
  the consumer learns of it.

The recorder writes every event to the kernel as it is recorded (`batch_size=1`), so a
SIGKILL loses no recorded step; `status_path` tells the parent, atomically, which
instance runs and how far it has processed and committed (used by quiesce), and
whether an offset commit is under way (used by a `when: busy` crash).
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import redis
import tenacity
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.lab.setups.connect import (
    KAFKA_CLIENT_TIMEOUTS,
    NO_RETRY,
    BoundedCommitter,
    CommitTimeout,
)
from driftlab.harness.lab.setups.stepping import RUN, read_command
from driftlab.harness.lab.setups.worker_process import (
    publish_status,
    run_until_sigterm,
    worker_config,
    worker_logging,
)
from driftlab.scenarios.architectures.cdc.protocol import (
    AFTER_APPLY,
    BEFORE_APPLY,
    CONFIG_ENV,
    COUNTER,
    Change,
    ConsumerConfig,
    parse_change,
)

# Writes only a newer version; a delete keeps its version so an older change that
# arrives later is still refused.
_APPLY_NEWER = """
local cur = redis.call('HGET', KEYS[1], 'version')
if cur and tonumber(cur) >= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '1' then
  redis.call('HDEL', KEYS[1], 'value')
  redis.call('HSET', KEYS[1], 'version', ARGV[2])
else
  redis.call('HSET', KEYS[1], 'value', ARGV[1], 'version', ARGV[2])
end
return 1
"""

log = logging.getLogger("driftlab.cdc_consumer")


class StoreError(Exception):
    """The derived store did not answer: retry from the last committed offsets."""


class CdcConsumer:
    """The consumer loop of one instance."""

    def __init__(self, cfg: ConsumerConfig) -> None:
        self.cfg = cfg
        self.rec = Recorder(cfg.run_dir, role="consumer", batch_size=1, flush_interval=1.0)
        self.redis = redis.Redis(
            host=cfg.redis_host,
            port=cfg.redis_port,
            password=cfg.redis_password,
            socket_timeout=cfg.redis_timeout,
            socket_connect_timeout=cfg.redis_timeout,
            decode_responses=True,
            # No silent retries inside the client: a failed call is the consumer's to
            # handle (it goes back to its committed offsets), and the history shows it.
            retry=NO_RETRY,
        )
        self.apply_newer = self.redis.register_script(_APPLY_NEWER)
        self.kafka = Consumer(
            {
                **cfg.kafka,
                "group.id": cfg.group,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                **KAFKA_CLIENT_TIMEOUTS,
            },
            logger=log,
        )
        self.committer = BoundedCommitter(self.kafka)
        self.stopping = False
        self.attempts: dict[str, int] = {}
        self.position: dict[int, int] = {}  # next offset to process, per partition
        self.committed: dict[int, int] = {}
        self.last_commit = time.monotonic()
        self.last_status = 0.0
        self.done = 0  # stepped mode: the last command carried out
        self.fetched: dict[int, int] = {}  # stepped mode: next offset to receive
        self.received: list[Change] = []  # stepped mode: received, not applied yet

    # --- lifecycle ---------------------------------------------------------------------

    def assign(self) -> None:
        """Assign the partitions at the group's committed offsets (the beginning if none)."""
        tps = [TopicPartition(self.cfg.topic, p) for p in self.cfg.partitions]
        committed = tenacity.Retrying(
            # The group's coordinator may still be loading (NOT_COORDINATOR at first).
            retry=tenacity.retry_if_exception_type(KafkaException),
            wait=tenacity.wait_fixed(0.5),
            stop=tenacity.stop_after_delay(60),
            before_sleep=tenacity.before_sleep_log(log, logging.INFO),
            reraise=True,
        )(self.kafka.committed, tps, timeout=10)
        start = []
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self.committed[tp.partition] = offset
            start.append(TopicPartition(self.cfg.topic, tp.partition, offset))
        self.kafka.assign(start)
        self.write_status(ready=True)

    def run(self) -> None:
        """Consume until SIGTERM (stepped first, while it has a control file)."""
        if self.cfg.control_path:
            # Commands written before this instance started were for an earlier one.
            self.done = read_command(Path(self.cfg.control_path))["seq"]
        self.assign()
        if self.cfg.control_path:
            self.run_stepped(Path(self.cfg.control_path))
        while not self.stopping:
            msgs = self.kafka.consume(num_messages=self.cfg.batch, timeout=0.1)
            batch = self.deliver(msgs)
            self.record_commits(self.committer.landed())
            try:
                if (
                    self.cfg.commit == BEFORE_APPLY
                    and batch
                    and not self.commit_positions({c.partition: c.offset + 1 for c in batch})
                ):
                    raise StoreError("the batch's offset commit failed")
                for i, change in enumerate(batch):
                    self.apply(change)
                    self.position[change.partition] = change.offset + 1
                    if i == 0:
                        # Published once a change of the batch is applied, so that a
                        # `when: busy` crash strikes where it costs: applied but not
                        # committed, or committed but not all applied. Published at
                        # the batch's start, a kill could land before its first apply.
                        self.write_status(force=True, in_flight=len(batch))
            except StoreError as exc:
                log.warning("store error, retrying from the committed offsets: %s", exc)
                self.rewind()
                self.write_status(force=True)
                continue
            committing = self.cfg.commit == AFTER_APPLY and self.due()
            if committing:
                self.commit_positions(dict(self.position))
            # Forced after a commit as after a batch: a `when: busy` crash reads from the
            # status whether anything applied is still uncommitted.
            self.write_status(force=bool(batch) or committing)
        self.write_status(force=True)
        self.rec.close()
        self.kafka.close()

    def run_stepped(self, control: Path) -> None:
        """Carry out one command of the control file at a time, until `run` or SIGTERM."""
        while not self.stopping:
            cmd = read_command(control)
            if cmd["seq"] <= self.done:
                time.sleep(0.01)
                continue
            if cmd["cmd"] == "poll":
                self.poll_one(int(cmd["partition"]))
            elif cmd["cmd"] == "apply" and self.received:
                change = self.received.pop(0)
                self.apply(change)
                self.position[change.partition] = change.offset + 1
            elif cmd["cmd"] == "commit":
                received = {c.partition: c.offset + 1 for c in self.received}
                applied = dict(self.position)
                self.commit_positions(
                    applied | received if self.cfg.commit == BEFORE_APPLY else applied
                )
            self.done = cmd["seq"]
            if cmd["cmd"] == RUN:
                break
            self.write_status(force=True)
        # Leaving stepped mode: what was received is applied, then the plain loop
        # fetches on from there.
        for change in self.received:
            self.apply(change)
            self.position[change.partition] = change.offset + 1
        self.received = []
        start = [
            TopicPartition(self.cfg.topic, p, self.position.get(p, self.committed[p]))
            for p in self.cfg.partitions
        ]
        self.kafka.assign(start)
        self.write_status(force=True)

    def poll_one(self, partition: int) -> None:
        """Receive the next change of `partition` (waiting for it to be captured)."""
        # Assigning only that partition at the next offset drops whatever was prefetched.
        offset = self.fetched.get(partition, self.committed.get(partition, OFFSET_BEGINNING))
        self.kafka.assign([TopicPartition(self.cfg.topic, partition, offset)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.stopping:
            msgs = [m for m in self.kafka.consume(num_messages=1, timeout=0.2) if not m.error()]
            if not msgs:
                continue
            self.fetched[partition] = msgs[0].offset() + 1
            batch = self.deliver(msgs)
            if batch:
                self.received.extend(batch)
                return
        log.warning("poll of partition %d: nothing to receive", partition)

    # --- the steps ---------------------------------------------------------------------

    def deliver(self, msgs: list[Message]) -> list[Change]:
        """Record a `deliver` per change event; Kafka errors are logged and skipped."""
        batch: list[Change] = []
        for msg in msgs:
            if msg.error() is not None:
                log.warning("kafka: %s", msg.error())
                continue
            change = parse_change(msg, self.cfg.id_field)
            if change is None:
                self.position[msg.partition()] = msg.offset() + 1
                continue
            attempt = self.attempts.get(change.msg_id, 0) + 1
            self.attempts[change.msg_id] = attempt
            self.rec.msg(
                "deliver",
                attempt=attempt,
                **self._fields(change),
            )
            batch.append(change)
        return batch

    def apply(self, change: Change) -> None:
        """Apply one change to Redis and record `apply` or `skip`; StoreError on failure."""
        if self.cfg.apply_ms:
            time.sleep(self.cfg.apply_ms / 1000)  # the consumer's own work per message
        name = f"{self.cfg.prefix}{change.key}"
        try:
            if self.cfg.effect == COUNTER:
                total = self.redis.incr(name)
                self.rec.msg(
                    "apply", store=self.cfg.store, **(self._fields(change) | {"value": str(total)})
                )
                return
            applied = self.apply_newer(
                keys=[name],
                args=[change.value or "", change.version, "1" if change.value is None else "0"],
            )
        except redis.RedisError as exc:
            raise StoreError(str(exc)) from exc
        action = "apply" if applied else "skip"
        self.rec.msg(action, store=self.cfg.store, **self._fields(change))

    def due(self) -> bool:
        return time.monotonic() - self.last_commit >= self.cfg.commit_ms / 1000

    def commit_positions(self, positions: dict[int, int]) -> bool:
        """Commit `positions` (next offsets) and record one `commit` each; False when
        the commit failed or got no answer in time (the caller retries)."""
        moved = {p: o for p, o in positions.items() if o != self.committed.get(p)}
        self.last_commit = time.monotonic()
        if not moved:
            return True
        # Published before the commit leaves: until its answer is taken in, Kafka may
        # hold offsets the status does not, and a kill would find nothing to deliver
        # again. The parent's `busy()` reads `committing` as not busy.
        self.write_status(force=True, committing=True)
        tps = [TopicPartition(self.cfg.topic, p, o) for p, o in moved.items()]
        try:
            done = self.committer.commit(tps)
        except (KafkaException, CommitTimeout) as exc:
            log.warning("commit failed (will retry): %s", exc)
            return False
        self.record_commits(done)
        return len(done) == len(tps)

    def record_commits(self, tps: list[TopicPartition]) -> None:
        """Take committed partitions as the group's offsets, with a `commit` event each."""
        for tp in tps:
            self.committed[tp.partition] = tp.offset
            self.rec.msg(
                "commit",
                channel=self.cfg.topic,
                partition=tp.partition,
                offset=tp.offset,
                consumer=self.cfg.group,
                process=self.cfg.instance,
            )

    def rewind(self) -> None:
        """Seek every partition back to its committed offset, after a back-off."""
        time.sleep(0.5)
        tps = []
        for p in self.cfg.partitions:
            offset = self.committed.get(p, OFFSET_BEGINNING)
            tps.append(TopicPartition(self.cfg.topic, p, offset))
            if offset >= 0:
                self.position[p] = offset
            else:
                self.position.pop(p, None)
        # A new assignment drops what was prefetched and restarts the fetches there.
        self.kafka.assign(tps)

    # --- helpers -----------------------------------------------------------------------

    def _fields(self, change: Change) -> dict[str, Any]:
        return {
            **change.fields(self.cfg.topic),
            "consumer": self.cfg.group,
            "process": self.cfg.instance,
        }

    def write_status(
        self,
        *,
        ready: bool = True,
        force: bool = False,
        in_flight: int = 0,
        committing: bool = False,
    ) -> None:
        """Atomically publish how far this instance has processed and committed, how
        many received changes it is applying right now (`in_flight`), and whether an
        offset commit may be landing that `committed` does not show yet (`committing`:
        one being sent, or one given up on that has not been taken in)."""
        now = time.monotonic()
        if not force and now - self.last_status < 0.1:
            return
        self.last_status = now
        status = {
            "instance": self.cfg.instance,
            "ready": ready,
            "position": {str(p): o for p, o in self.position.items()},
            "committed": {str(p): o for p, o in self.committed.items()},
            "done": self.done,
            "in_flight": in_flight,
            "committing": committing or self.committer.pending(),
            "received": [[c.partition, c.offset, c.value] for c in self.received],
        }
        publish_status(self.cfg.status_path, status)


def main() -> int:
    """Run one consumer instance from $DRIFTLAB_CONSUMER until SIGTERM."""
    worker_logging()
    starter = "driftlab.scenarios.architectures.cdc.processes.ConsumerProcess"
    cfg = ConsumerConfig(**worker_config(CONFIG_ENV, starter))
    consumer = CdcConsumer(cfg)
    log.info("instance %s: %s partitions %s", cfg.instance, cfg.topic, cfg.partitions)
    return run_until_sigterm(consumer)


if __name__ == "__main__":
    sys.exit(main())
