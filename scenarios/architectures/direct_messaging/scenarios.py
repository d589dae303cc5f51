"""Direct-messaging scenarios: claim C17 (a consumer offline misses what is pushed to
it), and its control (a producer that retries for longer than the outage)."""

from __future__ import annotations

from dataclasses import replace

from driftlab.checkers.kinds import LOST_MESSAGE
from driftlab.harness.lab.scenario import Scenario, expect, faults
from driftlab.harness.lab.workload.spec import WorkloadSpec

CONSUMER_OFFLINE = Scenario(
    name="direct-messaging-consumer-offline",
    claim="C17",
    setup="direct-messaging",
    summary=(
        "The application pushes every write over HTTP to a consumer process, with no "
        "broker in between. The consumer is SIGKILLed and stays down for 2 s: what the "
        "producer sent meanwhile is lost."
    ),
    setup_params={"retry_s": 0},
    workload=WorkloadSpec(clients=3, keys=20, distribution="uniform", rate=100, duration=8),
    faults=faults({"kind": "crash", "target": "receiver", "at": 2, "duration": 2}, recovery=2.0),
    expectations=expect(present=[LOST_MESSAGE]),
)

SCENARIOS = [
    CONSUMER_OFFLINE,
    # The control: the same run but for the producer's retries.
    replace(
        CONSUMER_OFFLINE,
        name="direct-messaging-retry",
        claim=None,
        summary=(
            "The control case of C17: the same outage, but the producer retries a refused "
            "send for up to 15 s, longer than the consumer is down (2 s, plus its restart). "
            "Nothing is lost (the producer's memory is the buffer a broker would be)."
        ),
        setup_params={"retry_s": 15},
        expectations=expect(absent=[LOST_MESSAGE]),
    ),
]
