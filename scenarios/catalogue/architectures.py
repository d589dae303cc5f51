"""The one registry of architectures; the lookups by name are derived from it.

A new architecture is a package of its own and one entry here. The engine never reads
this module: the application looks a scenario's setup, a simulated setup or a replay
driver up here and hands it over. A setup defined
outside the package (a user's own, see examples/) joins `SETUPS` with `register_setup`;
a scenario may instead carry its setup as a value (`Scenario.setup_factory`, a pipeline
file's), which is never entered here.
"""

from __future__ import annotations

from collections.abc import Callable

from driftlab.harness.lab.explore.spec import SetupSpec
from driftlab.harness.lab.replay.driver import ReplayDriver
from driftlab.harness.lab.scenario import Scenario
from driftlab.harness.lab.setups.base import Setup
from driftlab.scenarios.architectures.architecture import Architecture
from driftlab.scenarios.architectures.bounded_log import scenarios as bounded_log_scenarios
from driftlab.scenarios.architectures.bounded_log import sim as bounded_log_sim
from driftlab.scenarios.architectures.bounded_log.replay import BoundedLogDriver
from driftlab.scenarios.architectures.bounded_log.setup import BoundedLog
from driftlab.scenarios.architectures.cdc import scenarios as cdc_scenarios
from driftlab.scenarios.architectures.cdc import sim as cdc_sim
from driftlab.scenarios.architectures.cdc.replay import CdcDriver
from driftlab.scenarios.architectures.cdc.setup import Cdc
from driftlab.scenarios.architectures.compacted_log import scenarios as compacted_log_scenarios
from driftlab.scenarios.architectures.compacted_log import sim as compacted_log_sim
from driftlab.scenarios.architectures.compacted_log.replay import CompactedLogDriver
from driftlab.scenarios.architectures.compacted_log.setup import CompactedLog
from driftlab.scenarios.architectures.direct_messaging import (
    scenarios as direct_messaging_scenarios,
)
from driftlab.scenarios.architectures.direct_messaging.setup import DirectMessaging
from driftlab.scenarios.architectures.direct_producer import scenarios as direct_producer_scenarios
from driftlab.scenarios.architectures.direct_producer.setup import DirectProducer
from driftlab.scenarios.architectures.dual_write import scenarios as dual_write_scenarios
from driftlab.scenarios.architectures.dual_write import sim as dual_write_sim
from driftlab.scenarios.architectures.dual_write.replay import DualWriteDriver
from driftlab.scenarios.architectures.dual_write.setup import DualWrite
from driftlab.scenarios.architectures.event_sourced import scenarios as event_sourced_scenarios
from driftlab.scenarios.architectures.event_sourced import sim as event_sourced_sim
from driftlab.scenarios.architectures.event_sourced.replay import EventSourcedDriver
from driftlab.scenarios.architectures.event_sourced.setup import EventSourced
from driftlab.scenarios.architectures.outbox import scenarios as outbox_scenarios
from driftlab.scenarios.architectures.outbox import sim as outbox_sim
from driftlab.scenarios.architectures.outbox.replay import OutboxDriver
from driftlab.scenarios.architectures.outbox.setup import Outbox
from driftlab.scenarios.architectures.snapshot import scenarios as snapshot_scenarios
from driftlab.scenarios.architectures.snapshot.setup import SnapshotStream
from driftlab.scenarios.architectures.work_queue import scenarios as work_queue_scenarios
from driftlab.scenarios.architectures.work_queue import sim as work_queue_sim
from driftlab.scenarios.architectures.work_queue.replay import WorkQueueDriver
from driftlab.scenarios.architectures.work_queue.setup import WorkQueue

ARCHITECTURES: tuple[Architecture, ...] = (
    Architecture(
        "dual-write",
        (DualWrite,),
        tuple(dual_write_scenarios.SCENARIOS),
        dual_write_sim.SIMS,
        DualWriteDriver,
    ),
    Architecture("cdc", (Cdc,), tuple(cdc_scenarios.SCENARIOS), cdc_sim.SIMS, CdcDriver),
    Architecture(
        "outbox", (Outbox,), tuple(outbox_scenarios.SCENARIOS), outbox_sim.SIMS, OutboxDriver
    ),
    Architecture(
        "work-queue",
        (WorkQueue,),
        tuple(work_queue_scenarios.SCENARIOS),
        work_queue_sim.SIMS,
        WorkQueueDriver,
    ),
    Architecture(
        "bounded-log",
        (BoundedLog,),
        tuple(bounded_log_scenarios.SCENARIOS),
        bounded_log_sim.SIMS,
        BoundedLogDriver,
    ),
    Architecture(
        "compacted-log",
        (CompactedLog,),
        tuple(compacted_log_scenarios.SCENARIOS),
        compacted_log_sim.SIMS,
        CompactedLogDriver,
    ),
    Architecture(
        "event-sourced",
        (EventSourced,),
        tuple(event_sourced_scenarios.SCENARIOS),
        event_sourced_sim.SIMS,
        EventSourcedDriver,
    ),
    Architecture("snapshot-stream", (SnapshotStream,), tuple(snapshot_scenarios.SCENARIOS)),
    Architecture("direct-producer", (DirectProducer,), tuple(direct_producer_scenarios.SCENARIOS)),
    Architecture(
        "direct-messaging", (DirectMessaging,), tuple(direct_messaging_scenarios.SCENARIOS)
    ),
)

SETUPS: dict[str, type[Setup]] = {s.name: s for a in ARCHITECTURES for s in a.setups}
"""A scenario's `setup` name -> its class."""

REPLAY_DRIVERS: dict[str, type[ReplayDriver]] = {
    spec.name: a.driver for a in ARCHITECTURES if a.driver is not None for spec in a.sims
}
"""Simulated setup -> the driver that replays its schedules."""

SIMULATED_SETUPS: dict[str, SetupSpec] = {s.name: s for a in ARCHITECTURES for s in a.sims}
"""Simulated setup name -> its spec (the simulator twin `driftlab explore` searches),
in registry order."""


def setup_factory(scenario: Scenario) -> Callable[[], Setup]:
    """What builds the setup `scenario` runs on: the factory it carries (a pipeline
    file's), else the class its `setup` names; a ValueError names the known ones."""
    if scenario.setup_factory is not None:
        return scenario.setup_factory
    try:
        return SETUPS[scenario.setup]
    except KeyError:
        raise ValueError(
            f"scenario {scenario.name}: setup {scenario.setup!r} is unknown; "
            f"known setups: {', '.join(sorted(SETUPS))}"
        ) from None


def setup_services(scenario: Scenario) -> tuple[str, ...]:
    """The stack services the setup of `scenario` needs. A setup carried as a value is
    built to tell: building a setup starts nothing, `prepare` does."""
    if scenario.setup_factory is not None:
        return scenario.setup_factory().services
    return SETUPS[scenario.setup].services


def simulated_setup(name: str) -> SetupSpec:
    """The simulated setup of that name, or a ValueError listing the known ones."""
    try:
        return SIMULATED_SETUPS[name]
    except KeyError:
        raise ValueError(
            f"unknown setup {name!r}: choose one of {', '.join(SIMULATED_SETUPS)}"
        ) from None


def register_setup(setup: type[Setup]) -> type[Setup]:
    """Make a setup class defined outside this package known to scenarios by its
    `name` (usable as a class decorator); a name taken by another class is refused."""
    if not setup.name:
        raise ValueError(f"{setup.__qualname__} has no `name`; set the class attribute name")
    known = SETUPS.get(setup.name)
    if known is not None and known is not setup:
        raise ValueError(
            f"setup name {setup.name!r} is taken by {known.__module__}.{known.__qualname__}; "
            "choose another name"
        )
    SETUPS[setup.name] = setup
    return setup
