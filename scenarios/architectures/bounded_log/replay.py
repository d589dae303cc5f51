"""Replay of `bounded-log` on Kafka: a fast consumer that keeps up, a slow one stepped."""

from __future__ import annotations

from typing import Any

from driftlab.harness.lab.explore.schedule import Action, Step, describe
from driftlab.harness.lab.replay.driver import ReplayDriver, refuse, wait_for
from driftlab.harness.lab.replay.turnstile import ReplayError, Turnstile
from driftlab.harness.lab.setups.base import SetupContext
from driftlab.scenarios.architectures.bounded_log.setup import FAST, SLOW, BoundedLog


class BoundedLogDriver(ReplayDriver):
    """`bounded-log`: acknowledged produces into a one-partition topic read by `fast`
    (its own thread, free-running) and `slow` (read one record per scheduled `poll`).

    The simulated log keeps the last `retention` records. Kafka's retention deletes
    old segments by time, on the broker's clock; the replay keeps the topic's time
    retention out of reach and instead, after each `db-write` that the fast consumer
    has read, deletes every record but the last `retention` (DeleteRecords), which
    moves the log start exactly as the simulated retention does. A slow `poll` must
    receive the scheduled value.
    """

    def __init__(self, turnstile: Turnstile, params: dict[str, Any]) -> None:
        super().__init__(turnstile, params)
        self.setup = BoundedLog()
        self.retention = int(params.get("retention", 3))
        # An hour: the broker's own retention never strikes during a replay.
        self.params = {"retention_ms": 3_600_000, "segment_ms": 250}
        self.written = 0  # records produced: offsets 0 .. written-1 of a fresh topic

    def start(self, ctx: SetupContext) -> None:
        """Start the fast consumer only: the slow one reads when the schedule says."""
        ctx.steps.add(self.turnstile.hook)
        self.setup.consumers[FAST].start()

    def step(self, index: int, step: Step) -> None:
        """db-write of a client, or poll of `slow`."""
        what = f"step {index} ({describe(step)})"
        if step.action == Action.DB_WRITE and step.actor and step.key and step.value:
            self.clients[step.actor].write(step.key, step.value)
            self.written += 1
            self._await_fast(what)
            if self.written > self.retention:
                self.setup.trim(self.written - self.retention)
        elif step.action == Action.POLL and step.actor == SLOW:
            got = self.setup.consumers[SLOW].poll_one(self.turnstile.timeout)
            if got != step.value:
                raise ReplayError(f"{what}: {SLOW} received {got!r}, not {step.value!r}")
        else:
            raise refuse(what, "bounded-log", step)

    def _await_fast(self, what: str) -> None:
        """The simulated fast consumer reads each write at once: wait until it has."""
        fast = self.setup.consumers[FAST]
        wait_for(
            lambda: fast.position >= self.written,
            self.turnstile.timeout,
            lambda: f"{what}: {FAST} read to offset {fast.position}, not {self.written}",
        )

    def finish(self) -> None:
        """The slow consumer runs freely from where it is."""
        super().finish()
        self.setup.consumers[SLOW].start()
