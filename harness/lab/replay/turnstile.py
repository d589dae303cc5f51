"""The turnstile: one thread per scheduled actor, let through one step at a time.

Each actor of a replayed schedule (a client) runs its operations on a thread of its own.
An operation runs until it reaches a step point (`StepPoints`, e.g. `after-source-write`)
or returns; at a step point the turnstile parks the thread until the controller lets it
go. The controller moves exactly one actor at a time and waits until that actor parked
again or went idle, so the interleaving of the schedule is forced, not hoped for.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from driftlab.harness.lab.setups.base import AppCrash

IDLE = "idle"
RUNNING = "running"


class ReplayError(RuntimeError):
    """A replay could not force its schedule; the message names the step and why."""


@dataclass
class _Actor:
    name: str
    jobs: queue.Queue[Callable[[], None] | None]
    thread: threading.Thread | None = None
    state: str = IDLE  # idle | running | the step point it is parked at
    go: bool = False
    crash: bool = False
    error: str | None = None


class Turnstile:
    """Holds every actor at its step points until the controller releases it.

    `hook` is the StepHook to register on the setup's StepPoints; processes that are not
    actors of the turnstile (a quiesce helper) pass through untouched.
    """

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._cv = threading.Condition()
        self._actors: dict[str, _Actor] = {}

    # -- the client side ---------------------------------------------------------

    def hook(self, point: str, process: str, key: str) -> None:
        """Park `process` at `point` until released; raise AppCrash if told to crash."""
        with self._cv:
            actor = self._actors.get(process)
            if actor is None:
                return
            actor.state = point
            self._cv.notify_all()
            self._cv.wait_for(lambda: actor.go)
            actor.go = False
            actor.state = RUNNING
            crash, actor.crash = actor.crash, False
        if crash:
            raise AppCrash(f"{process} crashed at {point} writing {key}")

    def _loop(self, actor: _Actor) -> None:
        while (job := actor.jobs.get()) is not None:
            try:
                job()
            except Exception as exc:
                # Surfaced by the controller's wait: a failed step fails the replay.
                actor.error = f"{type(exc).__name__}: {exc}"
            with self._cv:
                actor.state = IDLE
                self._cv.notify_all()

    # -- the controller side -----------------------------------------------------

    def actor(self, name: str) -> None:
        """Start the thread of actor `name` (idempotent)."""
        if name in self._actors:
            return
        actor = _Actor(name, queue.Queue())
        actor.thread = threading.Thread(
            target=self._loop, args=(actor,), name=f"replay-{name}", daemon=True
        )
        self._actors[name] = actor
        actor.thread.start()

    def state(self, name: str) -> str:
        """`idle`, or the step point where actor `name` is parked."""
        with self._cv:
            return self._actors[name].state

    def run(self, name: str, job: Callable[[], None], what: str) -> str:
        """Start `job` on idle actor `name`; return where it stopped (a point or idle)."""
        self.actor(name)
        actor = self._actors[name]
        with self._cv:
            if actor.state != IDLE:
                raise ReplayError(f"{what}: {name} is parked at {actor.state}, not idle")
            actor.state = RUNNING
        actor.jobs.put(job)
        return self._settle(actor, what)

    def release(self, name: str, what: str, *, crash: bool = False) -> str:
        """Let parked actor `name` go on (or crash there); return where it stopped."""
        actor = self._actors.get(name)
        with self._cv:
            if actor is None or actor.state in (IDLE, RUNNING):
                state = actor.state if actor else "not started"
                raise ReplayError(f"{what}: {name} is {state}, not parked at a step point")
            actor.state = RUNNING
            actor.crash = crash
            actor.go = True
            self._cv.notify_all()
        return self._settle(actor, what)

    def _settle(self, actor: _Actor, what: str) -> str:
        with self._cv:
            if not self._cv.wait_for(lambda: actor.state != RUNNING, self.timeout):
                raise ReplayError(
                    f"{what}: {actor.name} neither reached a step point nor finished "
                    f"within {self.timeout:.0f} s (is a service down?)"
                )
            error, actor.error = actor.error, None
            state = actor.state
        if error is not None:
            raise ReplayError(f"{what}: {actor.name} failed: {error}")
        return state

    def close(self) -> None:
        """Let every parked actor finish and stop every thread."""
        with self._cv:
            for actor in self._actors.values():
                actor.go = True
            self._cv.notify_all()
        for actor in self._actors.values():
            actor.jobs.put(None)
        for actor in self._actors.values():
            if actor.thread is not None:
                actor.thread.join(timeout=self.timeout)
