"""Bounded-retention log scenarios: claim C6 (a slow consumer falls off the tail of a log
whose old segments are deleted, and misses messages; a fast one misses nothing)."""

from __future__ import annotations

from driftlab.checkers.kinds import (
    DUPLICATE_DELIVERY,
    INCONSISTENT_OFFSET,
    LOST_MESSAGE,
    NONMONOTONIC_POLL,
    POLL_SKIP,
    REORDER_DELIVERY,
)
from driftlab.harness.lab.scenario import Scenario, expect
from driftlab.harness.lab.workload.spec import WorkloadSpec

SCENARIOS = [
    Scenario(
        name="bounded-log-slow-consumer",
        claim="C6",
        setup="bounded-log",
        summary=(
            "Acknowledged produces at 150/s into a Kafka topic that keeps 2 s of data in "
            "200 ms segments. Two consumers read it from offset 0: `fast` keeps up, `slow` "
            "spends 100 ms per message (10/s). The slow one falls behind the deleted "
            "segments and is reset to the oldest retained offset, again and again: the "
            "messages in between are lost to it, while `fast` receives every one."
        ),
        setup_params={"retention_ms": 2000, "segment_ms": 200, "slow_ms": 100},
        workload=WorkloadSpec(clients=4, keys=20, distribution="uniform", rate=150, duration=10),
        expectations=expect(
            present=[LOST_MESSAGE, POLL_SKIP],
            absent=[
                DUPLICATE_DELIVERY,
                NONMONOTONIC_POLL,
                INCONSISTENT_OFFSET,
                REORDER_DELIVERY,
            ],
        ),
    ),
]
