"""Dual-write scenarios: claims C1 (the Figure 11-4 race), C2 (a failure between the
writes) and C13 (reading one's own write from an asynchronous view)."""

from __future__ import annotations

from driftlab.checkers.kinds import (
    CONTRADICTORY_ORDER,
    MISSING,
    PHANTOM,
    RYW_VIOLATION,
    STALE,
    STALE_OVERWRITE,
)
from driftlab.harness.lab.scenario import Scenario, expect, faults
from driftlab.harness.lab.workload.spec import WorkloadSpec

# A dual write never invents a value: a derived value that the source never committed
# is a bug of the lab, whatever the faults.
NO_PHANTOMS = (PHANTOM,)

PARTIAL_FAILURE_WORKLOAD = WorkloadSpec(
    clients=4, keys=10, distribution="uniform", rate=200, duration=10, rotate_s=0.5
)
"""C2's workload: keys cool down, so a divergence stays visible."""

APP_CRASH = {"kind": "app-crash", "target": "app", "at": 3, "duration": 2, "p": 0.3}
"""C2's crash point: the application SIGKILLed between its two writes."""

SCENARIOS = [
    Scenario(
        name="dual-write-race",
        claim="C1",
        setup="dual-write",
        summary=(
            "Concurrent clients write hot keys to PostgreSQL, then to a Redis cache and a "
            "search index; no fault. The writes reach the stores in different orders and "
            "the stores stay inconsistent."
        ),
        # With 2 ms of app work the last writes of a key rarely crossed (1-2 stale keys in
        # a 4 s run, once none); up to 20 ms, about as long as a slow cache call, leaves
        # 8-12 stale keys per 4 s run.
        setup_params={"derived": ["cache", "search"], "mode": "concurrent", "gap_ms": 20},
        workload=WorkloadSpec(
            clients=8, keys=4, distribution="zipf", rate=400, duration=10, rotate_s=1.0
        ),
        expectations=expect(
            present=[STALE, STALE_OVERWRITE, CONTRADICTORY_ORDER], absent=NO_PHANTOMS
        ),
    ),
    Scenario(
        name="dual-write-sequential",
        setup="dual-write",
        summary=(
            "The control case of C1: the same hot-key workload with the whole dual write "
            "under one lock. Without concurrency between the writes there is no race."
        ),
        setup_params={"derived": ["cache", "search"], "mode": "sequential"},
        workload=WorkloadSpec(clients=6, keys=3, distribution="zipf", rate=300, duration=10),
        expectations=expect(absent=[STALE, STALE_OVERWRITE, MISSING, *NO_PHANTOMS]),
    ),
    Scenario(
        name="dual-write-partial-failure",
        claim="C2",
        setup="dual-write",
        summary=(
            "The application crashes between its PostgreSQL write and its derived writes, "
            "then the cache becomes unreachable; the failed second writes are ignored. "
            "The derived stores keep old values."
        ),
        setup_params={"derived": ["cache", "search"], "on_failure": "ignore"},
        workload=PARTIAL_FAILURE_WORKLOAD,
        faults=faults(
            APP_CRASH, {"kind": "cut", "target": "redis", "at": 5.5, "duration": 1.5}, recovery=1.0
        ),
        expectations=expect(present=[STALE], absent=NO_PHANTOMS),
    ),
    Scenario(
        name="dual-write-read-your-writes",
        claim="C13",
        setup="dual-write",
        summary=(
            "The search index is an asynchronous view: the application hands each change "
            "to an indexer that refreshes the index every 300 ms. A client reading the "
            "index right after its own write sees an older value."
        ),
        setup_params={"derived": ["search"], "search": "indexer", "refresh_ms": 300},
        workload=WorkloadSpec(
            clients=4,
            keys=50,
            distribution="uniform",
            mix={"write": 0.5, "read": 0.5},
            read_own=True,
            read_stores=["search"],
            rate=100,
            duration=10,
        ),
        expectations=expect(present=[RYW_VIOLATION], absent=NO_PHANTOMS),
    ),
]
