"""Log broker scenario: claim C16 (acknowledged messages survive a broker crash)."""

from __future__ import annotations

from driftlab.checkers.kinds import INCONSISTENT_OFFSET, LOST_MESSAGE, NONMONOTONIC_SEND, POLL_SKIP
from driftlab.harness.lab.scenario import Scenario, expect, faults
from driftlab.harness.lab.workload.spec import WorkloadSpec

SCENARIOS = [
    Scenario(
        name="broker-crash-acked",
        claim="C16",
        setup="direct-producer",
        summary=(
            "The application produces to a 3-partition Kafka topic with acks=all and waits "
            "for each acknowledgement; Kafka is SIGKILLed mid-run and restarted. Every "
            "acknowledged message is read back at the offset it was acknowledged with: a "
            "case where the lab must report no loss."
        ),
        setup_params={"partitions": 3},
        workload=WorkloadSpec(clients=4, keys=20, distribution="uniform", rate=200, duration=10),
        faults=faults({"kind": "crash", "target": "kafka", "at": 5.0, "duration": 1.0}),
        expectations=expect(
            absent=[LOST_MESSAGE, INCONSISTENT_OFFSET, POLL_SKIP, NONMONOTONIC_SEND]
        ),
        quiesce_timeout=60.0,
    ),
]
