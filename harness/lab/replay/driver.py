"""The driver contract, and the moves several drivers share.

A driver owns the real setup (driftlab.harness.lab.setups) wired like the simulated one, and turns
one step of an executed schedule into one forced move: through the turnstile for a
client held at a step point, through its control file for a stepped consumer process.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.explore.schedule import Step
from driftlab.harness.lab.replay.turnstile import ReplayError, Turnstile
from driftlab.harness.lab.services.base import Service
from driftlab.harness.lab.setups.base import Client, Setup, SetupContext
from driftlab.harness.lab.setups.stepping import Control, StepFailed, SteppedProcess


class ReplayDriver(ABC):
    """Runs the steps of one simulated setup on its real counterpart."""

    setup: Setup
    params: dict[str, Any]

    def __init__(self, turnstile: Turnstile, params: dict[str, Any]) -> None:
        self.turnstile = turnstile
        self.clients = Clients(self)

    def start(self, ctx: SetupContext) -> None:
        """Start the prepared setup; every step point goes through the turnstile."""
        ctx.steps.add(self.turnstile.hook)
        self.setup.start()

    @abstractmethod
    def step(self, index: int, step: Step) -> None:
        """Force one step of the schedule; raise ReplayError if the stack will not."""

    def finish(self) -> None:
        """Before quiesce: stop the actors (every in-flight step is explicit already)."""
        self.turnstile.close()
        self.clients.close()


class Clients:
    """The application clients of a replay, one per scheduled client name."""

    def __init__(self, driver: ReplayDriver) -> None:
        self.driver = driver
        self.by_name: dict[str, Client] = {}

    def __getitem__(self, name: str) -> Client:
        if name not in self.by_name:
            self.by_name[name] = self.driver.setup.client(name)
        return self.by_name[name]

    def drop(self, name: str) -> None:
        """Close and forget a client (its application instance died)."""
        client = self.by_name.pop(name, None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def close(self) -> None:
        """Close every client."""
        for name in list(self.by_name):
            self.drop(name)


def refuse(what: str, setup: str, step: Step) -> ReplayError:
    """The error for a step the setup's simulator never takes (a hand-edited schedule)."""
    return ReplayError(
        f"{what}: the {setup} replay has no {step.action!r} move for {step.actor or 'nobody'}; "
        f"replay a schedule that `driftlab explore {setup}` saved"
    )


class Stepped:
    """A consumer process in stepped mode, driven through its control file."""

    def __init__(self, process: SteppedProcess, logs: Path, timeout: float) -> None:
        self.process = process
        self.control = Control(logs / f"{process.name}.control.json", timeout)

    @property
    def path(self) -> str:
        """The control file's path, for the process's configuration."""
        return str(self.control.path)

    def send(self, what: str, cmd: str, **fields: Any) -> dict[str, Any]:
        """Carry out one command; a process that will not is the step's ReplayError."""
        try:
            return self.control.send(self.process, cmd, **fields)
        except StepFailed as exc:
            raise ReplayError(f"{what}: {exc}") from None


def wait_for(done: Callable[[], bool], timeout: float, failure: Callable[[], str]) -> None:
    """Poll `done` until it holds; past `timeout`, raise ReplayError(`failure()`)."""
    if not wait_until(done, timeout, 0.02):
        raise ReplayError(failure())


def kill(process: Service, what: str, timeout: float = 30.0) -> None:
    """SIGKILL a consumer process and wait until it is gone."""
    process.kill()
    wait_for(
        lambda: not process.is_running(),
        timeout,
        lambda: f"{what}: {process.name} still runs {timeout:.0f} s after SIGKILL",
    )
