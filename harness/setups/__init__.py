"""Setups: the architectures under test, wired onto the stack's services.

`SETUPS` maps a scenario's `setup` name to its class; a new setup adds one entry, and
a setup defined outside the package (a user's own, see examples/) joins with
`register_setup`. The interface is in `harness.setups.base` and docs/scenarios.md.
"""

from __future__ import annotations

from harness.setups.base import Setup
from harness.setups.bounded_log import BoundedLog
from harness.setups.cdc import Cdc
from harness.setups.compaction import CompactedLog
from harness.setups.direct_messaging import DirectMessaging
from harness.setups.direct_producer import DirectProducer
from harness.setups.dual_write import DualWrite
from harness.setups.event_sourced import EventSourced
from harness.setups.outbox import Outbox
from harness.setups.snapshot import SnapshotStream
from harness.setups.work_queue import WorkQueue

SETUPS: dict[str, type[Setup]] = {
    DualWrite.name: DualWrite,
    BoundedLog.name: BoundedLog,
    CompactedLog.name: CompactedLog,
    SnapshotStream.name: SnapshotStream,
    Cdc.name: Cdc,
    Outbox.name: Outbox,
    DirectProducer.name: DirectProducer,
    WorkQueue.name: WorkQueue,
    DirectMessaging.name: DirectMessaging,
    EventSourced.name: EventSourced,
}


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
