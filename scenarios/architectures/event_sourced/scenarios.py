"""Event-sourced scenarios: claims C11 (projections are a replay of the log, through a
projector crash and a rebuild) and C12 (validation before append needs optimistic
concurrency: without it, concurrent commands break the invariant)."""

from __future__ import annotations

from driftlab.checkers.kinds import (
    DUPLICATE_APPLY,
    INVARIANT_VIOLATION,
    LOST_MESSAGE,
    PROJECTION_MISMATCH,
    STALE_OVERWRITE,
)
from driftlab.harness.lab.scenario import Scenario, expect, faults
from driftlab.harness.lab.workload.spec import WorkloadSpec

NO_OVERDRAFT = {"min": 0}

# Two hot accounts, six clients and a handler that takes a few milliseconds between
# validating and appending: concurrent withdrawals from one balance are the rule.
_CONTENDED = WorkloadSpec(clients=6, keys=2, distribution="uniform", rate=250, duration=8)
_CONTENDED_PARAMS = {"invariant": NO_OVERDRAFT, "withdraw_p": 0.6, "max_amount": 5, "gap_ms": 5}

# C11 and its planted bug: commands on ten Zipf-hot accounts, the projector killed twice.
_COMMANDS = WorkloadSpec(clients=4, keys=10, distribution="zipf", rate=150, duration=10)
_PROJECTOR_CRASHES = faults(
    {"kind": "crash", "target": "projector", "at": 3, "duration": 1},
    {"kind": "crash", "target": "projector", "at": 6, "duration": 1},
    recovery=2.0,
)

SCENARIOS = [
    Scenario(
        name="event-sourced-projection-rebuild",
        claim="C11",
        setup="event-sourced",
        summary=(
            "Commands append deposit and withdrawal events to an append-only log in "
            "PostgreSQL; a projector process folds the log into balances, checkpointing "
            "in the same transaction. The projector is SIGKILLed twice; at the end a fresh "
            "projector rebuilds the balances from position 0. Both projections equal a "
            "replay of the log."
        ),
        setup_params={"occ": True, "invariant": NO_OVERDRAFT, "gap_ms": 1},
        workload=_COMMANDS,
        faults=_PROJECTOR_CRASHES,
        expectations=expect(
            absent=[
                PROJECTION_MISMATCH,
                INVARIANT_VIOLATION,
                LOST_MESSAGE,
                DUPLICATE_APPLY,
                STALE_OVERWRITE,
            ]
        ),
    ),
    Scenario(
        name="event-sourced-checkpoint-apart",
        claim="C11-checkpoint-apart",
        setup="event-sourced",
        summary=(
            "A planted bug on C11's run: the projector saves its checkpoint on its own every "
            "2 s instead of in the projection's transaction. Each SIGKILL re-applies the "
            "events folded since the last save: the live projection counts them twice and "
            "no longer equals a replay of the log (the rebuilt one still does)."
        ),
        setup_params={
            "occ": True,
            "invariant": NO_OVERDRAFT,
            "gap_ms": 1,
            "checkpoint": "periodic",
            # Wide enough that a kill almost always lands after unsaved applies.
            "checkpoint_ms": 2000,
        },
        workload=_COMMANDS,
        faults=_PROJECTOR_CRASHES,
        expectations=expect(
            present=[PROJECTION_MISMATCH, DUPLICATE_APPLY],
            absent=[INVARIANT_VIOLATION, LOST_MESSAGE],
        ),
    ),
    Scenario(
        name="event-sourced-no-occ",
        claim="C12-no-occ",
        setup="event-sourced",
        summary=(
            "Concurrent withdrawals from two hot accounts, validated against the replayed "
            "balance (no overdraft), appended without an expected version. Two commands "
            "validated against one balance both append: the balance goes below zero."
        ),
        setup_params={**_CONTENDED_PARAMS, "occ": False},
        workload=_CONTENDED,
        expectations=expect(present=[INVARIANT_VIOLATION], absent=[PROJECTION_MISMATCH]),
    ),
    Scenario(
        name="event-sourced-occ",
        claim="C12",
        setup="event-sourced",
        summary=(
            "The same contended withdrawals, appended with the version they were validated "
            "against (optimistic concurrency): a concurrent append makes the insert fail, "
            "the command reloads and revalidates. The invariant holds."
        ),
        setup_params={**_CONTENDED_PARAMS, "occ": True},
        workload=_CONTENDED,
        expectations=expect(absent=[INVARIANT_VIOLATION, PROJECTION_MISMATCH]),
    ),
]
