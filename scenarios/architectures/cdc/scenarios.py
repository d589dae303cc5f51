"""Change data capture scenarios (Debezium on Kafka, consumer processes, Redis): claims
C3 (at-least-once after a consumer crash), C4 (offsets committed before applying),
C5 (a non-idempotent counter), C8 (per-partition order across restarts) and C15 (a cut
consumer -> Redis link, idempotent and not)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from driftlab.checkers.kinds import (
    DUPLICATE_APPLY,
    DUPLICATE_DELIVERY,
    LOST_MESSAGE,
    LOST_WRITE,
    MISSING,
    NONMONOTONIC_POLL,
    PHANTOM,
    REORDER_DELIVERY,
)
from driftlab.harness.lab.scenario import CONVERGES, Scenario, expect, faults
from driftlab.harness.lab.workload.spec import WorkloadSpec

# Writes spread over many keys, so every key's last write is one message among many.
SPREAD = WorkloadSpec(clients=4, keys=200, distribution="uniform", rate=150, duration=10)
# A counter per key of twenty: each counts many changes.
COUNTED = WorkloadSpec(clients=4, keys=20, distribution="uniform", rate=150, duration=10)

# Short windows far apart: a restart takes seconds on a loaded machine. Each kill waits
# until the consumer holds changes it applied and has not committed (`when: busy`): at a
# fixed time it could find one idle or still starting, with nothing applied since its
# last commit, and then nothing is redelivered (a loaded CI machine, and the docker
# backend, once gave C3 "not reproduced" that way). A kill whose wait ran out struck
# idle: the run is then inconclusive rather than "not reproduced".
CONSUMER_CRASHES = faults(
    {"kind": "crash", "target": "consumer", "at": 2.5, "duration": 0.5, "when": "busy"},
    {"kind": "crash", "target": "consumer", "at": 7.0, "duration": 0.5, "when": "busy"},
    recovery=2.0,
)

# The consumer's link to Redis cut twice, then healed.
STORE_CUTS = faults(
    {"kind": "cut", "target": "consumer->redis", "at": 2.5, "duration": 2.0},
    {"kind": "cut", "target": "consumer->redis", "at": 6.0, "duration": 1.5},
    recovery=2.0,
)

CONSUMER_CRASH = Scenario(
    name="cdc-consumer-crash",
    claim="C3",
    setup="cdc",
    summary=(
        "PostgreSQL changes flow through Debezium and Kafka to a consumer that applies "
        "only newer versions to Redis and commits offsets after applying. The consumer "
        "is SIGKILLed twice: it receives again what it had not committed, and the cache "
        "converges."
    ),
    setup_params={"effect": "versioned", "commit": "after-apply", "commit_ms": 1000},
    workload=SPREAD,
    faults=CONSUMER_CRASHES,
    expectations=expect(present=[DUPLICATE_DELIVERY], absent=[REORDER_DELIVERY, *CONVERGES]),
)

STORE_PARTITION = Scenario(
    name="cdc-store-partition",
    claim="C15",
    setup="cdc",
    summary=(
        "The link from the consumer to Redis is cut twice, then healed. The consumer "
        "retries from its last committed offsets; its versioned apply skips what it had "
        "already applied, and the cache converges."
    ),
    setup_params={
        "effect": "versioned",
        "commit": "after-apply",
        "commit_ms": 500,
        "store_timeout_ms": 500,
    },
    workload=SPREAD,
    faults=STORE_CUTS,
    expectations=expect(present=[DUPLICATE_DELIVERY], absent=CONVERGES),
)


def counted(of: Scenario, *, name: str, claim: str, summary: str, **params: Any) -> Scenario:
    """`of` with a non-idempotent effect, the consumer INCRing a counter per change, on
    COUNTED keys (`params` override more of its setup): the changes it had applied but
    not committed when its run broke off are counted again."""
    return replace(
        of,
        name=name,
        claim=claim,
        summary=summary,
        setup_params={**of.setup_params, "effect": "counter", **params},
        workload=COUNTED,
        expectations=expect(present=[DUPLICATE_APPLY, PHANTOM], absent=[LOST_MESSAGE]),
    )


SCENARIOS = [
    CONSUMER_CRASH,
    Scenario(
        name="cdc-commit-before-apply",
        claim="C4",
        setup="cdc",
        summary=(
            "The planted bug: the consumer commits each polled batch before applying it "
            "(6 ms of work per message). Each SIGKILL strikes inside a batch (`when: busy`) "
            "and skips the rest of it for good: those writes never reach the cache."
        ),
        setup_params={"effect": "versioned", "commit": "before-apply", "apply_ms": 6},
        # Keys written about once each: a skipped write is the key's last, so the cache
        # misses it for good.
        workload=WorkloadSpec(clients=4, keys=5000, distribution="uniform", rate=150, duration=10),
        # A restarted consumer first rejoins its group: on a loaded machine that took
        # more than the default 5 s of a busy crash's wait, and the crash struck idle.
        faults=faults(
            *(
                {
                    "kind": "crash",
                    "target": "consumer",
                    "at": at,
                    "duration": 1.0,
                    "when": "busy",
                    "wait": 10.0,
                }
                for at in (2.0, 4.5, 7.0)
            ),
            recovery=2.0,
        ),
        expectations=expect(present=[LOST_WRITE, MISSING], absent=[PHANTOM]),
    ),
    counted(
        CONSUMER_CRASH,
        name="cdc-counter-crash",
        claim="C5",
        summary=(
            "Each change INCRs a Redis counter (not idempotent); the consumer commits after "
            "applying and is SIGKILLed twice. The changes it had applied but not committed "
            "are applied again: the derived counters exceed the source's totals."
        ),
    ),
    Scenario(
        name="cdc-partitioned-crash",
        claim="C8",
        setup="cdc",
        summary=(
            "A key-partitioned change topic (3 partitions) with one consumer process per "
            "partition; two of them are SIGKILLed and restarted. Each resumes its partition "
            "from its committed offset: no key's changes arrive out of order."
        ),
        setup_params={"partitions": 3, "consumers": 3, "commit_ms": 500},
        workload=WorkloadSpec(clients=4, keys=12, distribution="zipf", rate=150, duration=10),
        faults=faults(
            {"kind": "crash", "target": "consumer-0", "at": 2.5, "duration": 1.5},
            {"kind": "crash", "target": "consumer-2", "at": 5.0, "duration": 1.5},
            {"kind": "crash", "target": "consumer", "at": 7.0, "duration": 1.0},
            recovery=2.0,
        ),
        expectations=expect(absent=[REORDER_DELIVERY, NONMONOTONIC_POLL, *CONVERGES]),
    ),
    STORE_PARTITION,
    counted(
        STORE_PARTITION,
        name="cdc-store-partition-counter",
        claim="C15-counter",
        summary=(
            "C15 with a non-idempotent effect: the consumer INCRs a counter per change. "
            "After each cut it retries from its last committed offsets and counts again "
            "what it had already counted."
        ),
        # Commits 2 s apart: a cut then nearly always finds changes applied but not yet
        # committed, even when Connect delivers in bursts on a loaded machine (at 500 ms a
        # cut once found none, and nothing was counted twice).
        commit_ms=2000,
    ),
]
