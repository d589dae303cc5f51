"""What one entry of the architecture registry holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from driftlab.harness.lab.explore.spec import SetupSpec
    from driftlab.harness.lab.replay.driver import ReplayDriver
    from driftlab.harness.lab.scenario import Scenario
    from driftlab.harness.lab.setups.base import Setup


@dataclass(frozen=True, slots=True)
class Architecture:
    """One architecture under test: its real setups, its scenarios and, when
    `driftlab explore` simulates it, its simulated setups and the driver that replays
    their schedules on the real stack."""

    name: str
    setups: tuple[type[Setup], ...]
    scenarios: tuple[Scenario, ...]
    sims: tuple[SetupSpec, ...] = ()
    driver: type[ReplayDriver] | None = None
