"""Every anomaly kind once: its checker, its group in the keyed pass, the sieve query
that keeps its suspect groups, what counts as a chance of it, its label in a report,
its Jepsen name and the kinds it implies.

Everything else that spells a kind reads it from here: checkers.anomaly.KINDS (the
checkers and their kinds), the reference checkers' modules (checkers.reference), the
Jepsen names of imported runs (harness.importers.jepsen.kinds), the report's labels.
tests/test_kinds.py fails when a kind lacks a part: a checker module, a check of its
route in the keyed pass, a sieve query, a chance definition in plain Python
(checkers.coverage) and in the keyed pass (checkers.keyed.coverage).
"""

from __future__ import annotations

from dataclasses import dataclass

KEY, PARTITION, MESSAGE = "key", "partition", "message"
"""The groups of the keyed pass (checkers.keyed.step: KEY, PARTITION, MESSAGE)."""


@dataclass(frozen=True, slots=True)
class Kind:
    """One anomaly kind, as docs/checkers.md specifies it."""

    name: str
    checker: str
    """the module of checkers.reference that finds it"""
    group: str
    """KEY, PARTITION or MESSAGE: the keyed pass's group that judges it"""
    sieve: str
    """the name of the query of checkers.keyed.sieve.SIEVE_QUERIES that keeps the
    groups that may hold it"""
    chance: str
    """what one chance of it is: what the checker judges, one unit per possible row"""
    label: str
    """how a report names it"""
    jepsen: str | None = None
    """Jepsen's names of the same anomaly, for an imported history; None: no counterpart"""
    implies: tuple[str, ...] = ()
    """kinds an anomaly of this kind always comes with, by definition; none does today
    (each kind is judged on its own; tests/test_kinds.py checks that any named is a
    kind)"""


TABLE: tuple[Kind, ...] = (
    Kind(
        "lost-message",
        "lost",
        MESSAGE,
        "lost-message",
        "a message acknowledged on a channel that a consumer (not the log audit) read to "
        "its end: one per (consumer, message)",
        "message never delivered to a consumer that read its channel to the end",
        ":lost-write, :unseen",
    ),
    Kind(
        "lost-write",
        "lost",
        KEY,
        "lost-write",
        "an acknowledged source write, in a history that quiesced, and a derived store with "
        "effects: one per (store, write)",
        "source write that never reached a derived store",
    ),
    Kind(
        "duplicate-delivery",
        "duplicates",
        MESSAGE,
        "duplicates",
        "a message delivered to a consumer (not the log audit): one per (consumer, message)",
        "message delivered more than once",
        "(none: redelivery is allowed)",
    ),
    Kind(
        "duplicate-apply",
        "duplicates",
        MESSAGE,
        "duplicates",
        "a message applied to a store: one per (store, message)",
        "message applied more than once",
    ),
    Kind(
        "duplicate-offset",
        "duplicates",
        MESSAGE,
        "duplicate-offset",
        "a message observed with an offset (sent or read) in a channel partition: one per "
        "(channel partition, message)",
        "message at two offsets of one partition",
        ":duplicate",
    ),
    Kind(
        "reorder-delivery",
        "reorder",
        KEY,
        "reorder-delivery",
        "a versioned delivery of a key after an earlier one to the same consumer instance",
        "older version delivered after a newer one",
    ),
    Kind(
        "stale-overwrite",
        "reorder",
        KEY,
        "stale-overwrite",
        "a versioned effect on a key of a store after an earlier one there",
        "older version applied over a newer one",
    ),
    Kind(
        "nonmonotonic-poll",
        "reorder",
        PARTITION,
        "polls",
        "a delivery with an offset after an earlier one to the same consumer instance "
        "from that channel partition",
        "consumer read an offset not above its previous one",
        ":nonmonotonic-poll, :int-nonmonotonic-poll",
    ),
    Kind(
        "poll-skip",
        "reorder",
        PARTITION,
        "polls",
        "a delivery with an offset after an earlier one to the same consumer instance "
        "from that channel partition",
        "consumer skipped offsets the log held",
        ":poll-skip, :int-poll-skip",
    ),
    Kind(
        "nonmonotonic-send",
        "reorder",
        PARTITION,
        "sends",
        "an acknowledged send with an offset after an earlier one of the same producer "
        "instance to that channel partition (a producer with two or more sends)",
        "producer's offsets went backwards",
        ":nonmonotonic-send, :int-nonmonotonic-send",
    ),
    Kind(
        "inconsistent-offset",
        "reorder",
        PARTITION,
        "offsets",
        "an offset of a channel partition holding at least one message, sent or read",
        "two messages at one offset",
        ":inconsistent-offsets",
    ),
    Kind(
        "missing",
        "divergence",
        KEY,
        "divergence",
        "a key held at the end by the source or by a derived store whose final state was "
        "read, both read at the end: one per (store, key)",
        "derived store lacks a key the source holds",
    ),
    Kind(
        "extra",
        "divergence",
        KEY,
        "divergence",
        "a key held at the end by the source or by a derived store whose final state was "
        "read, both read at the end: one per (store, key)",
        "derived store holds a key the source does not",
    ),
    Kind(
        "stale",
        "divergence",
        KEY,
        "divergence",
        "a key held at the end by the source or by a derived store whose final state was "
        "read, both read at the end: one per (store, key)",
        "derived store holds an older committed value",
    ),
    Kind(
        "phantom",
        "divergence",
        KEY,
        "divergence",
        "a key held at the end by the source or by a derived store whose final state was "
        "read, both read at the end: one per (store, key)",
        "derived store holds a value never committed",
    ),
    Kind(
        "ryw-violation",
        "staleness",
        KEY,
        "ryw-violation",
        "an acknowledged read (any store) invoked after its process's own acknowledged, "
        "versioned source write of the key",
        "read older than the reader's own write",
    ),
    Kind(
        "projection-mismatch",
        "eventsourcing",
        KEY,
        "projection-mismatch",
        "an aggregate with events or a final state in a projection store read at the end: "
        "one per (projection, aggregate)",
        "projection differs from the fold of its events",
    ),
    Kind(
        "invariant-violation",
        "eventsourcing",
        KEY,
        "invariant-violation",
        "an appended event, when the header gives an invariant",
        "event moved an aggregate out of its bounds",
    ),
    Kind(
        "contradictory-order",
        "graph",
        KEY,
        "contradictory-order",
        "a (store, key) with an effect that carries an acknowledged, versioned source write",
        "store applied a key's writes in an order contradicting the source's",
    ),
)

BY_NAME: dict[str, Kind] = {k.name: k for k in TABLE}


def by_checker() -> dict[str, tuple[str, ...]]:
    """checker -> its kinds, checkers and kinds in the table's order."""
    out: dict[str, list[str]] = {}
    for k in TABLE:
        out.setdefault(k.checker, []).append(k.name)
    return {c: tuple(kinds) for c, kinds in out.items()}
