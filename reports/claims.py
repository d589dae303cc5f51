"""The claims of DDIA chapter 11 the lab puts to the test, short form.

The full table (setup, fault, prediction, the verdict the lab must reach) is
docs/claims.md; its predictions are kept here so that the suite page can name every
claim, with or without a scenario yet, without reading the docs
(tests/test_claims_doc.py holds the two together).
"""

from __future__ import annotations

CLAIMS: dict[str, str] = {
    "C1": "Dual write with concurrent clients on hot keys: the writes reach the two "
    "systems in different orders and they stay inconsistent (Figure 11-4).",
    "C2": "Dual write with a crash or an unreachable store between the writes: one "
    "write succeeds, the other does not (the atomic-commit problem).",
    "C3": "CDC through a log, idempotent apply, consumer restart: messages are processed "
    "again, order is kept, nothing is lost, the stores converge.",
    "C4": "CDC whose consumer commits offsets before applying, then crashes: messages "
    "are skipped (lost) and the derived store diverges.",
    "C5": "CDC committing after a non-idempotent apply, consumer crash: messages are "
    "applied twice and the derived counter exceeds the source.",
    "C6": "A log with bounded retention and a slow consumer: the log is a ring buffer, "
    "the slow consumer misses messages, the others do not.",
    "C7": "An AMQP queue with competing consumers and a crash: redelivery reorders "
    "messages; updates that do not commute overwrite newer ones.",
    "C8": "A key-partitioned log with one consumer per partition, consumer restart: "
    "per-partition order is preserved.",
    "C9": "A log-compacted topic: a new derived system built from offset 0 equals the "
    "source state.",
    "C10": "CDC with an initial snapshot at a known log position converges; a snapshot "
    "not aligned to its offset loses or duplicates changes.",
    "C11": "Event sourcing: a live projection equals a full replay of the event log, "
    "also after a projection crash and rebuild.",
    "C12": "Event sourcing with command validation: without optimistic concurrency "
    "concurrent commands break invariants; with it they do not.",
    "C13": "An asynchronous derived view: a user may not read their own write; "
    "read-your-writes violations and lag are reported.",
    "C14": "A transactional outbox with CDC: one leader orders the writes, no divergence "
    "where the dual write diverges.",
    "C15": "CDC with a partition between consumer and derived store, then heal: "
    "idempotent apply converges, non-idempotent apply duplicates.",
    "C16": "A log broker with acknowledged produce, broker SIGKILLed and restarted: "
    "acknowledged messages survive (no lost message).",
    "C17": "Direct messaging without a broker, consumer offline for a while: messages "
    "sent meanwhile are lost.",
}
