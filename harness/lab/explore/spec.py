"""What a simulated setup is: how to build it and which steps its schedules hold.

A simulated setup is a small machine driven one step at a time by a schedule. It records
the same history a real run of it records (op, msg, fault, mark and state events of
driftlab.harness.history.schema) and tallies the cheap anomaly kinds as it goes; a step that is
not enabled in the current state is skipped (`step` returns None).

Each architecture's simulator twin (scenarios/architectures/<arch>/sim.py) declares its
setups with `spec`; driftlab.scenarios.catalogue.architectures.SIMULATED_SETUPS lists them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from driftlab.harness.lab.explore.schedule import Action, Step
from driftlab.harness.lab.explore.sim.machine import Sim, SimResult

CLIENTS = ("c1", "c2", "c3")
KEYS = ("k1", "k2")


@dataclass(frozen=True, slots=True)
class Move:
    """One kind of step a schedule of a setup may hold, with the actors it may name."""

    action: Action
    actors: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    partitions: tuple[int, ...] = ()
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SetupSpec:
    """A simulated setup: how to build it and which steps its schedules hold."""

    name: str
    summary: str
    claims: tuple[str, ...]
    make: Callable[[], Sim]
    moves: tuple[Move, ...]
    params: dict[str, Any] = field(default_factory=dict)

    def run(self, steps: Iterable[Step]) -> SimResult:
        """Run a schedule on a fresh instance of the setup."""
        return self.make().run(steps)


def spec(
    name: str,
    summary: str,
    claims: tuple[str, ...],
    cls: type[Sim],
    moves: tuple[Move, ...],
    **params: Any,
) -> SetupSpec:
    """A simulated setup named `name` whose machine is `cls` built with `params`."""

    def make() -> Sim:
        return cls(params, name)

    return SetupSpec(name, summary, claims, make, moves, params)
