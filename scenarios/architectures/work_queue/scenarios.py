"""Work-queue scenarios: claim C7 (a crashed competing consumer's messages are
redelivered after newer ones, and non-commuting updates go back in time)."""

from __future__ import annotations

from driftlab.checkers.kinds import LOST_MESSAGE, PHANTOM, REORDER_DELIVERY, STALE_OVERWRITE
from driftlab.harness.lab.scenario import Scenario, expect, faults
from driftlab.harness.lab.workload.spec import WorkloadSpec

SCENARIOS = [
    Scenario(
        name="work-queue-consumer-crash",
        claim="C7",
        setup="work-queue",
        summary=(
            "The application publishes versioned writes of a few keys to a RabbitMQ queue; "
            "three consumer processes compete for it with manual acks (every 200 ms) and a "
            "prefetch of 50 and write each key's latest value into Redis. Two consumers are "
            "SIGKILLed while they hold applied, unacked messages: the broker redelivers them "
            "to the others after newer versions, and older values overwrite newer ones."
        ),
        # The prefetch must not throttle: with 10 unacked messages per worker and acks
        # every 200 ms, 3 workers took at most 150 of the 200 messages/s, the queue backed
        # up and each worker took whole runs of consecutive messages. A killed worker then
        # often held the newest run, redelivered in order (C7 missed 1 seed in 3). With
        # room for 50, messages go round-robin one by one and a crash always strands
        # messages older than what the other workers already took.
        # Each crash waits (from its time on) until its worker holds 5 applied, unacked
        # messages (`when: busy`, `busy_unacked`). At a fixed time one struck just after
        # an ack: the worker held only the message it had just been given, the newest
        # in the queue, and its redelivery reordered nothing (a clean-clone run read 0).
        # Five take it ~75 ms at ~67 messages/s, so the oldest is older than newer
        # versions of its key the other workers took meanwhile.
        setup_params={
            "workers": 3,
            "prefetch": 50,
            "work_ms": 10,
            "ack_ms": 200,
            "busy_unacked": 5,
        },
        workload=WorkloadSpec(clients=4, keys=5, distribution="uniform", rate=200, duration=10),
        faults=faults(
            {"kind": "crash", "target": "worker-0", "at": 2.5, "duration": 1, "when": "busy"},
            {"kind": "crash", "target": "worker-1", "at": 6, "duration": 1, "when": "busy"},
            recovery=2.0,
        ),
        # Redelivery loses nothing and invents nothing: those would be bugs of the lab.
        expectations=expect(
            present=[REORDER_DELIVERY, STALE_OVERWRITE], absent=[LOST_MESSAGE, PHANTOM]
        ),
    ),
]
