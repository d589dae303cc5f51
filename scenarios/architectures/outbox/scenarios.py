"""Transactional outbox scenario: claim C14 (one transaction, one order of writes)."""

from __future__ import annotations

from driftlab.harness.lab.scenario import CONVERGES, Scenario, expect, faults
from driftlab.scenarios.architectures.dual_write.scenarios import (
    APP_CRASH,
    PARTIAL_FAILURE_WORKLOAD,
)

SCENARIOS = [
    Scenario(
        name="outbox-app-crash",
        claim="C14",
        setup="outbox",
        summary=(
            "The application writes the business row and an outbox row in one PostgreSQL "
            "transaction; Debezium captures the outbox only and a consumer applies its "
            "events to Redis. The application crashes between the two writes (C2's crash "
            "point) and the consumer's link to Redis is cut: the crashed transactions roll "
            "back whole, and the cache converges where the dual write diverges."
        ),
        setup_params={"commit": "after-apply", "commit_ms": 500, "store_timeout_ms": 500},
        # C2's workload and crash point: where the dual write diverges.
        workload=PARTIAL_FAILURE_WORKLOAD,
        faults=faults(
            APP_CRASH,
            {"kind": "cut", "target": "consumer->redis", "at": 5.5, "duration": 1.5},
            recovery=2.0,
        ),
        expectations=expect(absent=CONVERGES),
    ),
]
