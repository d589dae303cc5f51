"""Log compaction scenarios: claim C9 (a new derived store rebuilt from offset 0 of a
compacted change topic equals the source)."""

from __future__ import annotations

from driftlab.checkers.kinds import DUPLICATE_APPLY, EXTRA, MISSING, PHANTOM, STALE, STALE_OVERWRITE
from driftlab.harness.lab.scenario import Scenario, expect
from driftlab.harness.lab.workload.spec import WorkloadSpec

SCENARIOS = [
    Scenario(
        name="compacted-log-rebuild",
        claim="C9",
        setup="compacted-log",
        summary=(
            "Writes and deletes on 30 PostgreSQL rows flow through Debezium into a "
            "log-compacted Kafka topic (500 ms segments, min.cleanable.dirty.ratio 0.01; "
            "deletes leave tombstones). After the workload the log cleaner runs, and a new "
            "Redis store is rebuilt from offset 0: it equals the source, though the topic "
            "retained far fewer records than were produced (the `compaction` mark)."
        ),
        setup_params={"segment_ms": 500, "dirty_ratio": 0.01},
        workload=WorkloadSpec(
            clients=4,
            keys=30,
            distribution="uniform",
            mix={"write": 0.75, "delete": 0.25},
            rate=100,
            duration=10,
        ),
        expectations=expect(
            absent=[MISSING, STALE, PHANTOM, EXTRA, STALE_OVERWRITE, DUPLICATE_APPLY]
        ),
    ),
]
