"""The simulator twin of the event-sourced architecture: what `driftlab explore` runs."""

from __future__ import annotations

from typing import Any

from driftlab.harness.history.schema import Mark, MsgAction, OpPhase
from driftlab.harness.lab.explore.schedule import Action, Step
from driftlab.harness.lab.explore.sim.eventstore import EventStore
from driftlab.harness.lab.explore.sim.kv import KeyValueStore
from driftlab.harness.lab.explore.sim.machine import Sim
from driftlab.harness.lab.explore.spec import CLIENTS, Move, SetupSpec, spec


class EventSourcedSim(Sim):
    """C11/C12: commands validated against a replayed aggregate, events appended.

    With `check`, an append carries the version its validation read (optimistic
    concurrency) and fails if another event landed in between.
    """

    channel = "events"

    def __init__(self, params: dict[str, Any] | None = None, name: str | None = None) -> None:
        params = {"invariant": {"min": 0}, "check": False, **(params or {})}
        super().__init__(params, name)
        self.store = EventStore()
        self.check = bool(self.params["check"])
        self.inflight: dict[str, tuple[str, int, str]] = {}  # client -> (agg, version, op)
        self.log: list[tuple[str, int, int, str]] = []  # (aggregate, delta, version, msg_id)
        self.projection = KeyValueStore("projection:balance")

    def invariant_min(self) -> int | None:
        return self.params["invariant"].get("min")

    def step(self, step: Step) -> Step | None:
        a, client, agg = step.action, step.actor or "", step.key or ""
        if a == Action.DEPOSIT and client not in self.inflight and agg:
            op_id = self.op(client, "deposit", agg, "1", "events")
            version = self.append(agg, 1, None)
            self.done(
                op_id,
                client,
                "deposit",
                agg,
                OpPhase.OK,
                value="1",
                version=version,
                store="events",
            )
            return Step(Action.DEPOSIT, client, agg, "1")
        if a == Action.VALIDATE and client not in self.inflight and agg:
            op_id = self.op(client, "withdraw", agg, "-1", "events")
            if self.store.balance(agg) < 1:
                self.withdrawn(op_id, client, agg, OpPhase.FAIL, error="insufficient balance")
            else:
                self.inflight[client] = (agg, self.store.version(agg), op_id)
            return Step(Action.VALIDATE, client, agg)
        if a == Action.APPEND and client in self.inflight:
            agg, read, op_id = self.inflight.pop(client)
            version = self.append(agg, -1, read if self.check else None)
            if version is None:
                found = self.store.version(agg)
                error = f"expected version {read}, found {found}"
                self.withdrawn(op_id, client, agg, OpPhase.FAIL, error=error)
            else:
                self.withdrawn(op_id, client, agg, OpPhase.OK, version=version)
            return Step(Action.APPEND, client, agg, "-1")
        return None

    def withdrawn(self, op_id: str, client: str, agg: str, phase: str, **fields: Any) -> None:
        """Record the completion of a withdrawal of one from `agg`."""
        self.done(op_id, client, "withdraw", agg, phase, value="-1", store="events", **fields)

    def append(self, agg: str, delta: int, expected: int | None) -> int | None:
        version = self.store.append(agg, delta, expected)
        if version is None:
            return None
        msg_id = f"e{self.store.position}"
        self.rec.msg(
            MsgAction.PRODUCE,
            channel=self.channel,
            partition=0,
            offset=self.store.position - 1,
            msg_id=msg_id,
            key=agg,
            value=str(delta),
            version=version,
        )
        self.tally.produce(self.channel, msg_id)
        self.tally.event(agg, delta)
        self.log.append((agg, delta, version, msg_id))
        return version

    def finish(self) -> list[Step]:
        return [s for c in sorted(self.inflight) if (s := self.step(Step(Action.APPEND, c)))]

    def drain(self) -> None:
        """The projection folds the whole log, in order, into balances."""
        store = self.projection.name
        for offset, (agg, delta, version, msg_id) in enumerate(self.log):
            common = dict(
                consumer="projection",
                process="projection#1",
                channel=self.channel,
                partition=0,
                offset=offset,
                msg_id=msg_id,
                key=agg,
                version=version,
            )
            self.rec.msg(MsgAction.DELIVER, value=str(delta), attempt=1, **common)
            self.tally.deliver("projection", "projection#1", msg_id, agg, version)
            total = str(int(self.projection.rows.get(agg, ("0", None))[0]) + delta)
            self.projection.put(agg, total, version)
            self.rec.msg(MsgAction.APPLY, store=store, value=total, **common)
            self.tally.effect(store, agg, total, version, msg_id)
        self.mark(Mark.CONSUMER_DONE, consumer="projection", channel=self.channel)
        self.tally.done("projection", self.channel)

    def final_states(self) -> tuple[dict[str, str] | None, dict[str, dict[str, str]]]:
        return None, {self.projection.name: self.projection.values()}


SIMS: tuple[SetupSpec, ...] = (
    spec(
        "event-sourced",
        "withdrawals validated against the replayed balance, appended without an expected version",
        ("C12",),
        EventSourcedSim,
        (
            Move(Action.DEPOSIT, CLIENTS[:2], ("a1",)),
            Move(Action.VALIDATE, CLIENTS[:2], ("a1",)),
            Move(Action.APPEND, CLIENTS[:2]),
        ),
        check=False,
    ),
    spec(
        "event-sourced-checked",
        "the same commands, appended with the expected version their validation read",
        ("C11", "C12"),
        EventSourcedSim,
        (
            Move(Action.DEPOSIT, CLIENTS[:2], ("a1",)),
            Move(Action.VALIDATE, CLIENTS[:2], ("a1",)),
            Move(Action.APPEND, CLIENTS[:2]),
        ),
        check=True,
    ),
)
"""The simulated setups of this architecture."""
