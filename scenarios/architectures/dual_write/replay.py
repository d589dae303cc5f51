"""Replay of `dual-write` and `dual-write-crash` on PostgreSQL and Redis."""

from __future__ import annotations

from typing import Any

from driftlab.harness.lab.explore.schedule import Action, Step, describe
from driftlab.harness.lab.replay.driver import ReplayDriver, refuse
from driftlab.harness.lab.replay.turnstile import IDLE, ReplayError, Turnstile
from driftlab.harness.lab.setups.app_process import AFTER_SOURCE_WRITE
from driftlab.harness.lab.setups.base import AppCrash, Client
from driftlab.harness.lab.setups.stores import CACHE
from driftlab.scenarios.architectures.dual_write.setup import DualWrite


class DualWriteDriver(ReplayDriver):
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

    def step(self, index: int, step: Step) -> None:
        """db-write, cache-write or crash of a client (anything else is refused)."""
        what = f"step {index} ({describe(step)})"
        actor = step.actor or ""
        if step.action == Action.DB_WRITE and step.key and step.value:
            client = self.clients[actor]
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
            raise refuse(what, "dual-write", step)

    def _write(self, client: Client, key: str, value: str) -> None:
        try:
            client.write(key, value)
        except AppCrash:
            self.setup.context.recorder.mark(
                "app-crash",
                process=client.process,
                extra={"point": AFTER_SOURCE_WRITE, "key": key},
            )
            self.clients.drop(client.process)
