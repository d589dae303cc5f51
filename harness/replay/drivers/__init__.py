"""How each schedule step becomes a real action: one driver per simulated setup.

Each module holds the driver of one architecture; `DRIVERS` maps every simulated setup
(harness.explore.setups.SETUPS) to its driver.
"""

from __future__ import annotations

from harness.replay.drivers.base import Driver
from harness.replay.drivers.bounded_log import BoundedLogDriver
from harness.replay.drivers.cdc import CdcDriver
from harness.replay.drivers.compacted_log import CompactedLogDriver
from harness.replay.drivers.dual_write import DualWriteDriver
from harness.replay.drivers.event_sourced import EventSourcedDriver
from harness.replay.drivers.work_queue import WorkQueueDriver

DRIVERS: dict[str, type[Driver]] = {
    "dual-write": DualWriteDriver,
    "dual-write-crash": DualWriteDriver,
    "cdc": CdcDriver,
    "cdc-commit-before": CdcDriver,
    "cdc-counter": CdcDriver,
    "outbox": CdcDriver,
    "amqp": WorkQueueDriver,
    "bounded-log": BoundedLogDriver,
    "compacted-log": CompactedLogDriver,
    "event-sourced": EventSourcedDriver,
    "event-sourced-checked": EventSourcedDriver,
}
"""Simulated setup -> its replay driver."""

__all__ = ["DRIVERS", "Driver"]
