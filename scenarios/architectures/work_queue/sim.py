"""The simulator twin of the work-queue architecture: what `driftlab explore` runs."""

from __future__ import annotations

from typing import Any

from driftlab.harness.history.schema import FaultPhase, Mark, MsgAction
from driftlab.harness.lab.explore.schedule import Action, Step
from driftlab.harness.lab.explore.sim.kv import KeyValueStore
from driftlab.harness.lab.explore.sim.machine import DbSim, handling
from driftlab.harness.lab.explore.sim.queue import Message, Queue
from driftlab.harness.lab.explore.spec import CLIENTS, KEYS, Move, SetupSpec, spec


class AmqpSim(DbSim):
    """C7: commits go to an AMQP queue; competing workers (prefetch 1) overwrite the cache."""

    channel = "updates"
    group = "workers"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.queue = Queue()
        self.cache = KeyValueStore("cache")
        self.workers = [f"w{i + 1}" for i in range(self.params.get("workers", 2))]
        self.up = dict.fromkeys(self.workers, True)
        self.instance = dict.fromkeys(self.workers, 1)
        self.holding: dict[str, tuple[Message, int]] = {}
        self.crash_ids: dict[str, str] = {}

    def process(self, worker: str) -> str:
        return f"{worker}#{self.instance[worker]}"

    def step(self, step: Step) -> Step | None:
        a, w = step.action, step.actor or ""
        if a == Action.DB_WRITE and step.key and w:
            value, version, lsn = self.write_source(w, step.key)
            self.queue.publish(Message(f"m{lsn}", step.key, value, version))
            self.produced(f"m{lsn}", step.key, value, version, lsn)
            return Step(Action.DB_WRITE, w, step.key, value)
        if w not in self.up:
            return None
        if a == Action.POLL and self.up[w] and w not in self.holding:
            return self.take(w)
        if a == Action.APPLY and self.up[w] and w in self.holding:
            return self.apply(w)
        if a == Action.CRASH and self.up[w]:
            self.up[w] = False
            self.crash_ids[w] = self.fault(FaultPhase.START, "kill", self.process(w))
            if w in self.holding:
                self.queue.requeue(self.holding.pop(w)[0])
            return Step(Action.CRASH, w)
        if a == Action.RESTART and not self.up[w]:
            self.up[w] = True
            self.fault(FaultPhase.STOP, "kill", self.process(w), self.crash_ids.pop(w))
            self.instance[w] += 1
            return Step(Action.RESTART, w)
        return None

    def take(self, w: str) -> Step | None:
        got = self.queue.take()
        if got is None:
            return None
        msg, attempt = got
        self.holding[w] = (msg, attempt)
        self.rec.msg(
            MsgAction.DELIVER,
            **handling(self.group, self.process(w), self.channel, msg),
            attempt=attempt,
        )
        self.tally.deliver(self.group, self.process(w), msg.msg_id, msg.key, msg.version)
        return Step(Action.POLL, w, msg.key, msg.value)

    def apply(self, w: str) -> Step:
        msg, attempt = self.holding.pop(w)
        common = handling(self.group, self.process(w), self.channel, msg)
        # A plain worker overwrites: updates of one key do not commute.
        self.cache.put(msg.key, msg.value, msg.version)
        self.rec.msg(MsgAction.APPLY, store="cache", **common)
        self.tally.effect("cache", msg.key, msg.value, msg.version, msg.msg_id)
        self.rec.msg(MsgAction.ACK, attempt=attempt, **common)
        return Step(Action.APPLY, w, msg.key, msg.value)

    def drain(self) -> None:
        """Live workers drain first: the broker hands a dead worker's unacked messages
        to a live one at once (Figure 11-2); crashed workers restart afterwards."""
        self.work()
        for w in self.workers:
            self.step(Step(Action.RESTART, w))
        self.work()
        self.mark(Mark.CONSUMER_DONE, consumer=self.group, channel=self.channel)
        self.tally.done(self.group, self.channel)

    def work(self) -> None:
        """Every live worker applies what it holds or takes the next, until none can."""
        progress = True
        while progress:
            progress = False
            for w in self.workers:
                action = Action.APPLY if w in self.holding else Action.POLL
                progress |= self.step(Step(action, w)) is not None

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        return self.source_rows(), {"cache": self.cache.values()}


SIMS: tuple[SetupSpec, ...] = (
    spec(
        "amqp",
        "db commits on a hot key -> AMQP queue -> two competing workers (prefetch 1) that "
        "overwrite the cache",
        ("C7",),
        AmqpSim,
        (
            Move(Action.DB_WRITE, CLIENTS[:2], KEYS[:1]),
            Move(Action.POLL, ("w1", "w2")),
            Move(Action.APPLY, ("w1", "w2")),
            Move(Action.CRASH, ("w1", "w2")),
            Move(Action.RESTART, ("w1", "w2")),
        ),
        workers=2,
    ),
)
"""The simulated setups of this architecture."""
