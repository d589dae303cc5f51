"""How each schedule step becomes a real action, per simulated setup.

A driver owns the real setup (harness.setups) wired like the simulated one, and turns
one step of an executed schedule into one forced move through the turnstile.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from harness.explore.schedule import Action, Step, describe
from harness.replay.turnstile import IDLE, ReplayError, Turnstile
from harness.setups.base import AppCrash, Client, Setup, SetupContext
from harness.setups.cdc import Cdc, ConsumerProcess
from harness.setups.cdc_consumer import AFTER_APPLY, VERSIONED, parse_change
from harness.setups.dual_write import AFTER_SOURCE_WRITE, CACHE, DualWrite


class Driver(ABC):
    """Runs the steps of one simulated setup on its real counterpart."""

    setup: Setup
    params: dict[str, Any]

    def __init__(self, turnstile: Turnstile, params: dict[str, Any]) -> None:
        self.turnstile = turnstile

    def start(self, ctx: SetupContext) -> None:
        """Start the prepared setup; every step point goes through the turnstile."""
        ctx.steps.add(self.turnstile.hook)
        self.setup.start()

    @abstractmethod
    def step(self, index: int, step: Step) -> None:
        """Force one step of the schedule; raise ReplayError if the stack will not."""

    def finish(self) -> None:
        """Before quiesce: stop the actors (every in-flight step is explicit already)."""
        self.turnstile.close()


class DualWriteDriver(Driver):
    """`dual-write`, `dual-write-crash`: clients writing PostgreSQL, then the Redis cache.

    `db-write` starts the client's write and holds it at `after-source-write`;
    `cache-write` lets it finish; a client `crash` SIGKILLs its application process
    there (with the `app-crash` mark the nemesis would record) and a new instance takes
    its name.
    """

    def __init__(self, turnstile: Turnstile, params: dict[str, Any]) -> None:
        super().__init__(turnstile, params)
        self.setup = DualWrite()
        self.params = {"derived": [CACHE]}
        self.clients: dict[str, Client] = {}

    def _client(self, name: str) -> Client:
        if name not in self.clients:
            self.clients[name] = self.setup.client(name)
        return self.clients[name]

    def step(self, index: int, step: Step) -> None:
        """db-write, cache-write or crash of a client (anything else is refused)."""
        what = f"step {index} ({describe(step)})"
        actor = step.actor or ""
        if step.action == Action.DB_WRITE and step.key and step.value:
            client = self._client(actor)
            key, value = step.key, step.value
            where = self.turnstile.run(actor, lambda: self._write(client, key, value), what)
            if where != AFTER_SOURCE_WRITE:
                raise ReplayError(f"{what}: {actor} stopped at {where}, not {AFTER_SOURCE_WRITE}")
        elif step.action in (Action.CACHE_WRITE, Action.CRASH):
            crash = step.action == Action.CRASH
            if crash:
                # A real crash: the instance's process dies while held between its writes.
                self.setup.kill_app(actor)
            where = self.turnstile.release(actor, what, crash=crash)
            if where != IDLE:
                raise ReplayError(f"{what}: {actor} stopped again at {where}")
        else:
            raise ReplayError(f"{what}: the dual-write replay has no {step.action!r} move")

    def _write(self, client: Client, key: str, value: str) -> None:
        try:
            client.write(key, value)
        except AppCrash:
            name = client.process
            self.setup.context.recorder.mark(
                "app-crash",
                process=name,
                extra={"point": AFTER_SOURCE_WRITE, "key": key},
            )
            with contextlib.suppress(Exception):
                client.close()
            del self.clients[name]

    def finish(self) -> None:
        """Stop the actors and close every client."""
        super().finish()
        for client in self.clients.values():
            with contextlib.suppress(Exception):
                client.close()


class CdcDriver(Driver):
    """`cdc`, `cdc-commit-before`: PostgreSQL -> Debezium -> Kafka -> consumer -> Redis.

    The one consumer `g` is the OS process `consumer-0` in stepped mode: it receives,
    applies and commits only when its control file says so (cdc_consumer.py), and the
    driver waits until it reports each command done. A `db-write` returns once Debezium
    has captured the change into Kafka, so a later `poll` finds it; the poll goes to the
    real partition of that change (Kafka's partitioner is not the simulator's crc32) and
    must receive the scheduled value. `crash` is a SIGKILL, `restart` a new instance.
    """

    def __init__(self, turnstile: Turnstile, params: dict[str, Any]) -> None:
        super().__init__(turnstile, params)
        self.setup = Cdc()
        self.params = {
            "partitions": int(params.get("partitions", 2)),
            "commit": params.get("policy", AFTER_APPLY),
            "effect": params.get("effect", VERSIONED),
        }
        self.clients: dict[str, Client] = {}
        self.seq = 0
        self.captured: dict[str | None, tuple[int, int]] = {}  # value -> partition, offset
        self.reader: Consumer | None = None

    @property
    def consumer(self) -> ConsumerProcess:
        """The consumer process standing for the simulator's `g`."""
        return self.setup.consumers[0]

    def start(self, ctx: SetupContext) -> None:
        """Start the prepared pipeline with its consumer in stepped mode, and a capture
        reader."""
        ctx.steps.add(self.turnstile.hook)
        for c in self.setup.consumers:
            c.config.control_path = str(ctx.logs / f"{c.name}.control.json")
        self.setup.start()
        self.reader = Consumer(
            {
                "bootstrap.servers": self.setup.bootstrap_direct,
                "group.id": f"replay-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            }
        )
        topic = self.setup.topic
        self.reader.assign(
            [
                TopicPartition(topic, p, OFFSET_BEGINNING)
                for p in range(int(self.params["partitions"]))
            ]
        )

    def step(self, index: int, step: Step) -> None:
        """db-write, db-delete, poll, apply, commit, crash or restart of `g`."""
        what = f"step {index} ({describe(step)})"
        actor = step.actor or ""
        match step.action:
            case Action.DB_WRITE | Action.DB_DELETE if step.key:
                if actor not in self.clients:
                    self.clients[actor] = self.setup.client(actor)
                client = self.clients[actor]
                if step.action == Action.DB_WRITE and step.value:
                    client.write(step.key, step.value)
                else:
                    client.delete(step.key)
                self._await_capture(step.value, what)
            case Action.POLL:
                partition, offset = self.captured.get(step.value, (-1, -1))
                if partition < 0:
                    raise ReplayError(f"{what}: {step.value!r} was never captured into Kafka")
                status = self._command(what, "poll", partition=partition)
                received = status.get("received") or []
                if not received or received[-1][2] != step.value:
                    raise ReplayError(
                        f"{what}: the consumer received {received[-1:] or 'nothing'} from "
                        f"partition {partition}, not {step.value!r} at offset {offset}"
                    )
            case Action.APPLY:
                self._command(what, "apply")
            case Action.COMMIT:
                self._command(what, "commit")
            case Action.CRASH:
                self.consumer.kill()
                deadline = time.monotonic() + 30
                while self.consumer.is_running() and time.monotonic() < deadline:
                    time.sleep(0.05)
            case Action.RESTART:
                self.consumer.start()
                self.consumer.wait_healthy(60)
            case _:
                raise ReplayError(f"{what}: the cdc replay has no {step.action!r} move yet")

    def _await_capture(self, value: str | None, what: str) -> None:
        """Read the topic until the change carrying `value` is in it."""
        assert self.reader is not None
        deadline = time.monotonic() + 120  # Debezium on a loaded machine
        while value not in self.captured:
            if time.monotonic() > deadline:
                raise ReplayError(f"{what}: Debezium did not capture it within 120 s")
            for msg in self.reader.consume(num_messages=10, timeout=0.2):
                change = None if msg.error() else parse_change(msg)
                if change is not None:
                    self.captured[change.value] = (change.partition, change.offset)

    def _command(self, what: str, cmd: str, **fields: Any) -> dict[str, Any]:
        """Hand the consumer one command and wait until it reports it done."""
        consumer = self.consumer
        if not consumer.is_running():
            raise ReplayError(f"{what}: the consumer is not running")
        self.seq += 1
        path = Path(str(consumer.config.control_path))
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"seq": self.seq, "cmd": cmd, **fields}))
        os.replace(tmp, path)
        deadline = time.monotonic() + self.turnstile.timeout
        while time.monotonic() < deadline:
            status = consumer.status()
            if status.get("done", 0) >= self.seq:
                return status
            if not consumer.is_running():
                raise ReplayError(f"{what}: the consumer died (see logs/{consumer.name}.log)")
            time.sleep(0.02)
        raise ReplayError(f"{what}: the consumer did not finish it within the step timeout")

    def finish(self) -> None:
        """Let the consumer run freely (a crashed one restarts so at quiesce)."""
        super().finish()
        for c in self.setup.consumers:
            if c.is_running() and c.config.control_path:
                self._command("quiesce", "run")
            c.config.control_path = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        for client in self.clients.values():
            with contextlib.suppress(Exception):
                client.close()


DRIVERS: dict[str, type[Driver]] = {
    "dual-write": DualWriteDriver,
    "dual-write-crash": DualWriteDriver,
    "cdc": CdcDriver,
    "cdc-commit-before": CdcDriver,
}
"""Simulated setup -> its replay driver."""
