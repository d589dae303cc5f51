"""Transactional outbox scenario: claim C14 (one transaction, one order of writes)."""

from __future__ import annotations

from harness.workload.spec import WorkloadSpec
from scenarios.model import ABSENT, Scenario, faults

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
        # C2's workload: keys cool down, so a divergence would stay visible.
        workload=WorkloadSpec(
            clients=4,
            keys=10,
            distribution="uniform",
            mix={"write": 1.0},
            rate=200,
            duration=10,
            rotate_s=0.5,
        ),
        faults=faults(
            {"kind": "app-crash", "target": "app", "at": 3, "duration": 2, "p": 0.3},
            {"kind": "cut", "target": "consumer->redis", "at": 5.5, "duration": 1.5},
            recovery=2.0,
        ),
        expectations={
            "missing": ABSENT,
            "stale": ABSENT,
            "phantom": ABSENT,
            "extra": ABSENT,
            "lost-write": ABSENT,
            "lost-message": ABSENT,
            "stale-overwrite": ABSENT,
        },
    ),
]
