"""Replay of `amqp` on RabbitMQ: the work-queue setup's workers, stepped one message at
a time."""

from __future__ import annotations

from typing import Any

from driftlab.harness.lab.explore.schedule import Action, Step, describe
from driftlab.harness.lab.replay.driver import ReplayDriver, Stepped, kill, refuse, wait_for
from driftlab.harness.lab.replay.turnstile import ReplayError, Turnstile
from driftlab.harness.lab.setups.base import SetupContext
from driftlab.harness.lab.setups.stepping import RUN
from driftlab.harness.lab.setups.worker_process import WorkerProcess
from driftlab.scenarios.architectures.work_queue.setup import WorkQueue


class WorkQueueDriver(ReplayDriver):
    """`amqp`: confirmed publishes -> RabbitMQ queue -> competing workers -> Redis.

    The simulator's worker `w<n>` is the process `worker-<n-1>` in stepped mode
    (work_queue_worker.py): `poll` takes the queue's head message unacked (basic.get)
    and must hold the scheduled value, `apply` writes Redis and acks it, `crash` is a
    SIGKILL after which the broker puts the held message back at the head of the queue,
    `restart` a new instance. A `db-write` is the application's confirmed publish (this
    setup's source of truth is the producer, as in the real work-queue scenarios).

    At quiesce the live workers drain the queue before the crashed ones restart, as the
    simulator's drain does: the broker hands a dead worker's message to a live one.
    """

    def __init__(self, turnstile: Turnstile, params: dict[str, Any]) -> None:
        super().__init__(turnstile, params)
        self.setup = WorkQueue()
        # Prefetch 1 and no delay: each worker holds one message, as simulated.
        self.params = {"workers": int(params.get("workers", 2)), "prefetch": 1, "work_ms": 0}
        self.stepped: dict[str, Stepped] = {}
        self.ready = 0  # messages the broker should hold ready, by the schedule
        self.holding: dict[str, str] = {}  # worker -> the value it holds unacked

    def start(self, ctx: SetupContext) -> None:
        """Start every worker in stepped mode."""
        ctx.steps.add(self.turnstile.hook)
        for i, proc in enumerate(self.setup.workers.values(), start=1):
            stepped = Stepped(proc, ctx.logs, self.turnstile.timeout)
            proc.config["control_path"] = stepped.path
            self.stepped[f"w{i}"] = stepped
        self.setup.start()

    def _worker(self, name: str, what: str) -> Stepped:
        if name not in self.stepped:
            raise ReplayError(
                f"{what}: no worker {name!r}; the amqp replay has {', '.join(self.stepped)}"
            )
        return self.stepped[name]

    def step(self, index: int, step: Step) -> None:
        """db-write of a client; poll, apply, crash or restart of a worker."""
        what = f"step {index} ({describe(step)})"
        actor = step.actor or ""
        if step.action == Action.DB_WRITE and step.key and step.value:
            self.clients[actor].write(step.key, step.value)
            self.ready += 1
            return
        worker = self._worker(actor, what)
        proc = worker.process
        assert isinstance(proc, WorkerProcess)
        match step.action:
            case Action.POLL:
                held = worker.send(what, "poll").get("held")
                if held != [step.key, step.value]:
                    raise ReplayError(f"{what}: {actor} holds {held}, not {step.value!r}")
                self.holding[actor] = str(step.value)
                self.ready -= 1
            case Action.APPLY:
                if worker.send(what, "apply").get("held") is not None:
                    raise ReplayError(f"{what}: {actor} could not apply (see its log)")
                self.holding.pop(actor, None)
            case Action.CRASH:
                kill(proc, what)
                if self.holding.pop(actor, None) is not None:
                    self.ready += 1
                self._await_ready(what)
            case Action.RESTART:
                proc.start()
                proc.wait_healthy(60)
            case _:
                raise refuse(what, "amqp", step)

    def _await_ready(self, what: str) -> None:
        """Wait until the broker holds the ready messages the schedule says: a killed
        worker's unacked message is back only once the broker saw its connection close."""
        wait_for(
            lambda: self.setup.depth().message_count == self.ready,
            self.turnstile.timeout,
            lambda: f"{what}: the queue does not hold {self.ready} ready messages",
        )

    def finish(self) -> None:
        """Live workers run freely and drain the queue; then crashed ones restart."""
        super().finish()
        for worker in self.stepped.values():
            proc = worker.process
            assert isinstance(proc, WorkerProcess)
            if proc.is_running():
                worker.send("quiesce", RUN)
            proc.config.pop("control_path", None)
        live = [w for w in self.setup.workers.values() if w.is_running()]
        if live:
            self.ready = 0
            self._await_ready("quiesce")
        for proc in self.setup.workers.values():
            if not proc.is_running():
                proc.start()
                proc.wait_healthy(60)
