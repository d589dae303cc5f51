"""Replay of `event-sourced` and `event-sourced-checked` on the PostgreSQL event log."""

from __future__ import annotations

from typing import Any

from driftlab.harness.lab.explore.schedule import Action, Step, describe
from driftlab.harness.lab.replay.driver import ReplayDriver, refuse
from driftlab.harness.lab.replay.turnstile import IDLE, ReplayError, Turnstile
from driftlab.scenarios.architectures.event_sourced.setup import (
    AFTER_VALIDATE,
    EventSourced,
    EventSourcedClient,
)


class EventSourcedDriver(ReplayDriver):
    """`event-sourced(-checked)`: commands validated against the replayed aggregate.

    `deposit` runs a +1 command to its end; `validate` starts a -1 command and holds it
    at `after-validate` (unless validation rejected it: the simulator's `fail`);
    `append` lets the held command append. The checked setup appends with the expected
    version (`occ`) and no retry, so a conflict fails the command as simulated.
    """

    def __init__(self, turnstile: Turnstile, params: dict[str, Any]) -> None:
        super().__init__(turnstile, params)
        self.setup = EventSourced()
        self.params = {
            "occ": bool(params.get("check", False)),
            "invariant": params.get("invariant", {"min": 0}),
            "retries": 0,
        }

    def step(self, index: int, step: Step) -> None:
        """deposit, validate or append of a client (anything else is refused)."""
        what = f"step {index} ({describe(step)})"
        actor = step.actor or ""
        match step.action:
            case Action.DEPOSIT | Action.VALIDATE if step.key:
                client = self.clients[actor]
                assert isinstance(client, EventSourcedClient)
                key, delta = step.key, 1 if step.action == Action.DEPOSIT else -1
                event_id = f"{actor}-{index}"  # the log's event ids are unique per run
                where = self.turnstile.run(
                    actor, lambda: client.command(key, delta, event_id), what
                )
                if step.action == Action.DEPOSIT and where == AFTER_VALIDATE:
                    where = self.turnstile.release(actor, what)
                if where not in (IDLE, AFTER_VALIDATE):
                    raise ReplayError(f"{what}: {actor} stopped at {where}")
            case Action.APPEND:
                where = self.turnstile.release(actor, what)
                if where != IDLE:
                    raise ReplayError(f"{what}: {actor} stopped again at {where}")
            case _:
                raise refuse(what, "event-sourced", step)
