"""The simulator twin of the dual-write architecture: what `driftlab explore` runs."""

from __future__ import annotations

from typing import Any

from driftlab.harness.history.schema import OpPhase
from driftlab.harness.lab.explore.schedule import Action, Step
from driftlab.harness.lab.explore.sim.kv import KeyValueStore
from driftlab.harness.lab.explore.sim.machine import DbSim
from driftlab.harness.lab.explore.spec import CLIENTS, KEYS, Move, SetupSpec, spec


class DualWriteSim(DbSim):
    """C1/C2: each client writes the database, then the same value to the cache.

    A client crash step between the two writes (C2) abandons the cache write.
    """

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        super().__init__(params, name)
        self.cache = KeyValueStore("cache")
        self.inflight: dict[str, tuple[str, str, int]] = {}

    def step(self, step: Step) -> Step | None:
        client = step.actor or ""
        if step.action == Action.DB_WRITE and client not in self.inflight and step.key:
            value, version, _ = self.write_source(client, step.key)
            self.inflight[client] = (step.key, value, version)
            return Step(Action.DB_WRITE, client, step.key, value)
        if step.action == Action.CRASH and client in self.inflight:
            # The application dies between its two writes; a new process takes over.
            self.mark("app-crash", process=client)
            key, value, _ = self.inflight.pop(client)
            return Step(Action.CRASH, client, key, value)
        if step.action == Action.CACHE_WRITE and client in self.inflight:
            key, value, version = self.inflight.pop(client)
            op_id = self.op(client, "write", key, value, "cache")
            self.cache.put(key, value, version)
            self.done(
                op_id, client, "write", key, OpPhase.OK, value=value, version=version, store="cache"
            )
            self.tally.effect("cache", key, value, version, None)
            return Step(Action.CACHE_WRITE, client, key, value)
        return None

    def finish(self) -> list[Step]:
        return [s for c in sorted(self.inflight) if (s := self.step(Step(Action.CACHE_WRITE, c)))]

    def drain(self) -> None:
        """No consumers: the application writes the cache itself."""

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        return self.source_rows(), {"cache": self.cache.values()}


SIMS: tuple[SetupSpec, ...] = (
    spec(
        "dual-write",
        "clients write the db, then the cache, concurrently on hot keys",
        ("C1",),
        DualWriteSim,
        (Move(Action.DB_WRITE, CLIENTS, KEYS), Move(Action.CACHE_WRITE, CLIENTS)),
    ),
    spec(
        "dual-write-crash",
        "dual write whose clients may crash between the db and the cache write",
        ("C2",),
        DualWriteSim,
        (
            Move(Action.DB_WRITE, CLIENTS[:2], KEYS),
            Move(Action.CACHE_WRITE, CLIENTS[:2]),
            Move(Action.CRASH, CLIENTS[:2]),
        ),
    ),
)
"""The simulated setups of this architecture."""
