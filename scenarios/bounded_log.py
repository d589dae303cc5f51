"""Bounded-retention log scenarios: claim C6 (a slow consumer falls off the tail of a log
whose old segments are deleted, and misses messages; a fast one misses nothing)."""

from __future__ import annotations

from harness.workload.spec import WorkloadSpec
from scenarios.model import ABSENT, PRESENT, Scenario, faults

SCENARIOS = [
    Scenario(
        name="bounded-log-slow-consumer",
        claim="C6",
        setup="bounded-log",
        summary=(
            "Acknowledged produces at 150/s into a Kafka topic that keeps 3 s of data in "
            "250 ms segments. Two consumers read it from offset 0; from 1 s to 8 s the "
            "`slow` one spends 40 ms per message (25/s), falls behind the deleted "
            "segments and is reset to the oldest retained offset: the messages in between "
            "are lost to it, while the `fast` consumer receives every one."
        ),
        setup_params={"retention_ms": 3000, "segment_ms": 250},
        workload=WorkloadSpec(
            clients=4, keys=20, distribution="uniform", mix={"write": 1.0}, rate=150, duration=10
        ),
        faults=faults(
            {"kind": "slow-consumer", "target": "slow", "at": 1.0, "duration": 7.0, "delay_ms": 40},
            recovery=2.0,
        ),
        expectations={
            "lost-message": PRESENT,
            "poll-skip": PRESENT,
            "duplicate-delivery": ABSENT,
            "nonmonotonic-poll": ABSENT,
            "inconsistent-offset": ABSENT,
            "reorder-delivery": ABSENT,
        },
    ),
]
