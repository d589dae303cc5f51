"""How each schedule step becomes a real action, per simulated setup.

A driver owns the real setup (harness.setups) wired like the simulated one, and turns
one step of an executed schedule into one forced move through the turnstile.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import Any

from harness.explore.schedule import Action, Step, describe
from harness.replay.turnstile import IDLE, ReplayError, Turnstile
from harness.setups.base import AppCrash, Client, Setup, SetupContext
from harness.setups.dual_write import AFTER_SOURCE_WRITE, CACHE, DualWrite


class Driver(ABC):
    """Runs the steps of one simulated setup on its real counterpart."""

    setup: Setup
    params: dict[str, Any]

    def __init__(self, turnstile: Turnstile) -> None:
        self.turnstile = turnstile

    def prepare(self, ctx: SetupContext) -> None:
        """Prepare and start the real setup; every step point goes through the turnstile."""
        ctx.steps.add(self.turnstile.hook)
        self.setup.prepare(ctx)
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
    `cache-write` lets it finish; a client `crash` makes it die there (AppCrash, with the
    `app-crash` mark the nemesis would record) and a new instance takes its name.
    """

    def __init__(self, turnstile: Turnstile) -> None:
        super().__init__(turnstile)
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


DRIVERS: dict[str, type[Driver]] = {
    "dual-write": DualWriteDriver,
    "dual-write-crash": DualWriteDriver,
}
"""Simulated setup -> its replay driver."""
