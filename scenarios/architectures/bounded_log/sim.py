"""The simulator twin of the bounded-log architecture: what `driftlab explore` runs."""

from __future__ import annotations

from typing import Any

from driftlab.harness.history.schema import Mark
from driftlab.harness.lab.explore.schedule import Action, Step
from driftlab.harness.lab.explore.sim.consumer import LogConsumer
from driftlab.harness.lab.explore.sim.log import LogBroker
from driftlab.harness.lab.explore.sim.machine import DbSim
from driftlab.harness.lab.explore.spec import CLIENTS, KEYS, Move, SetupSpec, spec


class BoundedLogSim(DbSim):
    """C6: a one-partition log keeping `retention` records; `fast` keeps up, `slow` polls."""

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.log = LogBroker.create(1, retention=self.params.get("retention", 3))
        self.consumers = {g: LogConsumer(g, 1) for g in ("fast", "slow")}

    def step(self, step: Step) -> Step | None:
        if step.action == Action.DB_WRITE and step.actor and step.key:
            value, version, lsn = self.write_source(step.actor, step.key)
            self.capture(self.log, step.key, value, version, lsn)
            self.poll("fast")  # the fast consumer keeps up with every write
            return Step(Action.DB_WRITE, step.actor, step.key, value)
        if step.action == Action.POLL and step.actor == "slow":
            return self.poll("slow")
        return None

    def poll(self, group: str) -> Step | None:
        consumer = self.consumers[group]
        got = consumer.poll(self.log, 0)
        if got is None:
            return None
        consumer.take()  # received means processed: this setup has no derived store
        rec, attempt = got
        return self.delivered(group, consumer.process, 0, rec, attempt)

    def drain(self) -> None:
        for group in self.consumers:
            while self.poll(group) is not None:
                pass
            self.mark(Mark.CONSUMER_DONE, consumer=group, channel=self.channel)
            self.tally.done(group, self.channel)

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        return self.source_rows(), {}


SIMS: tuple[SetupSpec, ...] = (
    spec(
        "bounded-log",
        "a log keeping the last 3 records; consumer `fast` keeps up, "
        "`slow` polls when the schedule says",
        ("C6",),
        BoundedLogSim,
        (Move(Action.DB_WRITE, CLIENTS[:2], KEYS), Move(Action.POLL, ("slow",))),
        retention=3,
    ),
)
"""The simulated setups of this architecture."""
