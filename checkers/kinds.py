"""Every anomaly kind once, one row each: its checker, its group in the keyed pass, the
sieve query that keeps its suspect groups, what counts as a chance of it and the name
it is counted under, its label and class in a report, its Jepsen name, how the synthetic
history plants it where a final value shows it, and the properties other layers select kinds by
(what a converging store never shows, what a sequence diagram explains, what a pipeline
run can see). A kind's name is a constant here, spelled once.

Everything else that spells a kind reads it from here: driftlab.checkers.anomaly.KINDS (the
checkers and their kinds), the reference checkers' modules (driftlab.checkers.reference), the
Jepsen names of imported runs (driftlab.harness.lab.importers.jepsen.kinds), the report's labels and
classes, the scenarios' expectations, the simulator's tally, the explorer's
properties, the chance definitions (driftlab.checkers.coverage and the keyed pass's) and
the synthetic history's plants. tests/test_kinds.py fails when a kind lacks a part: a
checker module, a check of its route in the keyed pass, a sieve query, a chance definition
in plain Python (driftlab.checkers.coverage) and in the keyed pass
(driftlab.checkers.keyed.coverage).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, replace

KEY, PARTITION, MESSAGE = "key", "partition", "message"
"""The groups of the keyed pass (driftlab.checkers.keyed.step: KEY, PARTITION, MESSAGE)."""

LOST_MESSAGE = "lost-message"
LOST_WRITE = "lost-write"
DUPLICATE_DELIVERY = "duplicate-delivery"
DUPLICATE_APPLY = "duplicate-apply"
DUPLICATE_OFFSET = "duplicate-offset"
REORDER_DELIVERY = "reorder-delivery"
STALE_OVERWRITE = "stale-overwrite"
NONMONOTONIC_POLL = "nonmonotonic-poll"
POLL_SKIP = "poll-skip"
NONMONOTONIC_SEND = "nonmonotonic-send"
INCONSISTENT_OFFSET = "inconsistent-offset"
MISSING = "missing"
EXTRA = "extra"
STALE = "stale"
PHANTOM = "phantom"
RYW_VIOLATION = "ryw-violation"
PROJECTION_MISMATCH = "projection-mismatch"
INVARIANT_VIOLATION = "invariant-violation"
CONTRADICTORY_ORDER = "contradictory-order"


@dataclass(frozen=True, slots=True)
class Kind:
    """One anomaly kind, as docs/checkers.md specifies it."""

    name: str
    checker: str
    """the module of driftlab.checkers.reference that finds it"""
    group: str
    """KEY, PARTITION or MESSAGE: the keyed pass's group that judges it"""
    sieve: str
    """the name of the query of driftlab.checkers.keyed.sieve.SIEVE_QUERIES that keeps the
    groups that may hold it"""
    chance_item: str
    """what one chance of it is, what the checker judges, without an article (a verdict
    says "it holds no <chance_item>")"""
    label: str
    """how a report names it"""
    _: KW_ONLY
    report_class: str
    """the anomaly class a report's summary groups it under (one per checker)"""
    per: str = ""
    """what a chance is counted per, as "(consumer, message)"; "": one per `chance_item`"""
    jepsen: str | None = None
    """Jepsen's names of the same anomaly, for an imported history; None: no counterpart"""
    jepsen_fails: bool = False
    """Jepsen's checker fails on its counterpart: an imported run forbids it"""
    rebalance_allowed: bool = False
    """Jepsen allows it when a consumer may be rebalanced (`:subscribe` ops)"""
    breaks_convergence: bool = False
    """a derived store that converges to its source never shows it: no key missing,
    stale or invented, no write or message lost, no newer value overwritten"""
    final_state: bool = False
    """judged from the final states read at the end, not at a moment of the run"""
    diagram: int | None = None
    """its rank (lower first) among the kinds whose evidence is an interleaving of
    writes on one key of one store, which a report draws as a sequence diagram
    (final-state kinds before the others, whatever their rank); None: not drawn"""
    from_broker: bool = False
    """judged from a broker's sends and deliveries, which a pipeline run never sees
    (driftlab reads a pipeline's stores from outside)"""
    store_versions: bool = False
    """judged from the versions a store shows (a key seen at version 5, later at 3): a
    pipeline may name it only when one of its stores is read with a version"""
    chances: str = ""
    """the name its chances are counted under (driftlab.checkers.coverage.CHANCES, the
    keyed pass's driftlab.checkers.keyed.coverage.QUERIES), where kinds judged on the same
    units share one, as the divergence kinds do; "": its own name"""
    planted: str | None = None
    """for a kind judged from final states: the value that, held at the end by a derived
    store for a key the source holds with another value, one never committed there, shows
    this kind; the synthetic history generator (driftlab.harness.lab.testing.synthetic)
    plants the kind so. None: no such value (the generator plants the kind its own way)"""
    implies: tuple[str, ...] = ()
    """kinds an anomaly of this kind always comes with, by definition; none does today
    (each kind is judged on its own; tests/test_kinds.py checks that any named is a
    kind)"""

    @property
    def counted_as(self) -> str:
        """The name its chances are counted under: `chances`, or its own."""
        return self.chances or self.name

    @property
    def chance(self) -> str:
        """The chance as a report shows it: what it is, and per what it is counted."""
        return f"{self.chance_item}: one per {self.per}" if self.per else self.chance_item


# The four divergence kinds are judged on the same chances (the keys of the final
# states) and differ only in what a store holds against the source; the two poll kinds
# (a consumer's polls of one partition) only in what the consumer read: each sibling is
# the first with what differs replaced.
_MISSING = Kind(
    MISSING,
    "divergence",
    KEY,
    "divergence",
    "key held at the end by the source or by a derived store whose final state was read, "
    "both read at the end",
    "derived store lacks a key the source holds",
    report_class="divergence",
    per="(store, key)",
    chances="divergence",
    breaks_convergence=True,
    final_state=True,
    diagram=2,
)
_NONMONOTONIC_POLL = Kind(
    NONMONOTONIC_POLL,
    "reorder",
    PARTITION,
    "polls",
    "delivery with an offset after an earlier one to the same consumer instance from that "
    "channel partition",
    "consumer read an offset not above its previous one",
    report_class="reorder",
    jepsen=":nonmonotonic-poll, :int-nonmonotonic-poll",
    jepsen_fails=True,
    rebalance_allowed=True,
    from_broker=True,
    chances="polls",
)

TABLE: tuple[Kind, ...] = (
    Kind(
        LOST_MESSAGE,
        "lost",
        MESSAGE,
        "lost-message",
        "message acknowledged on a channel that a consumer (not the log audit) read to its end",
        "message never delivered to a consumer that read its channel to the end",
        report_class="lost",
        per="(consumer, message)",
        jepsen=":lost-write, :unseen",
        jepsen_fails=True,
        breaks_convergence=True,
        from_broker=True,
    ),
    Kind(
        LOST_WRITE,
        "lost",
        KEY,
        "lost-write",
        "acknowledged source write, in a history that quiesced, and a derived store with effects",
        "source write that never reached a derived store",
        report_class="lost",
        per="(store, write)",
        breaks_convergence=True,
        diagram=6,
    ),
    Kind(
        DUPLICATE_DELIVERY,
        "duplicates",
        MESSAGE,
        "duplicates",
        "message delivered to a consumer (not the log audit)",
        "message delivered more than once",
        report_class="duplicate",
        per="(consumer, message)",
        jepsen="(none: redelivery is allowed)",
        from_broker=True,
    ),
    Kind(
        DUPLICATE_APPLY,
        "duplicates",
        MESSAGE,
        "duplicates",
        "message applied to a store",
        "message applied more than once",
        report_class="duplicate",
        per="(store, message)",
    ),
    Kind(
        DUPLICATE_OFFSET,
        "duplicates",
        MESSAGE,
        "duplicate-offset",
        "message observed with an offset (sent or read) in a channel partition",
        "message at two offsets of one partition",
        report_class="duplicate",
        per="(channel partition, message)",
        jepsen=":duplicate",
        jepsen_fails=True,
        from_broker=True,
    ),
    Kind(
        REORDER_DELIVERY,
        "reorder",
        KEY,
        "reorder-delivery",
        "versioned delivery of a key after an earlier one to the same consumer instance",
        "older version delivered after a newer one",
        report_class="reorder",
        from_broker=True,
    ),
    Kind(
        STALE_OVERWRITE,
        "reorder",
        KEY,
        "stale-overwrite",
        "versioned effect on a key of a store after an earlier one there",
        "older version applied over a newer one",
        report_class="reorder",
        breaks_convergence=True,
        diagram=5,
        store_versions=True,
    ),
    _NONMONOTONIC_POLL,
    replace(
        _NONMONOTONIC_POLL,
        name=POLL_SKIP,
        label="consumer skipped offsets the log held",
        jepsen=":poll-skip, :int-poll-skip",
    ),
    Kind(
        NONMONOTONIC_SEND,
        "reorder",
        PARTITION,
        "sends",
        "acknowledged send with an offset after an earlier one of the same producer "
        "instance to that channel partition (a producer with two or more sends)",
        "producer's offsets went backwards",
        report_class="reorder",
        jepsen=":nonmonotonic-send, :int-nonmonotonic-send",
        jepsen_fails=True,
        from_broker=True,
    ),
    Kind(
        INCONSISTENT_OFFSET,
        "reorder",
        PARTITION,
        "offsets",
        "offset of a channel partition holding at least one message, sent or read",
        "two messages at one offset",
        report_class="reorder",
        jepsen=":inconsistent-offsets",
        jepsen_fails=True,
        from_broker=True,
    ),
    _MISSING,
    replace(_MISSING, name=EXTRA, label="derived store holds a key the source does not", diagram=3),
    replace(_MISSING, name=STALE, label="derived store holds an older committed value", diagram=0),
    replace(
        _MISSING,
        name=PHANTOM,
        label="derived store holds a value never committed",
        planted="never-committed",
        diagram=1,
    ),
    Kind(
        RYW_VIOLATION,
        "staleness",
        KEY,
        "ryw-violation",
        "acknowledged read (any store) invoked after its process's own acknowledged, "
        "versioned source write of the key",
        "read older than the reader's own write",
        report_class="stale read",
    ),
    Kind(
        PROJECTION_MISMATCH,
        "eventsourcing",
        KEY,
        "projection-mismatch",
        "aggregate with events or a final state in a projection store read at the end",
        "projection differs from the fold of its events",
        report_class="invariant violation",
        per="(projection, aggregate)",
    ),
    Kind(
        INVARIANT_VIOLATION,
        "eventsourcing",
        KEY,
        "invariant-violation",
        "appended event, when the header gives an invariant",
        "event moved an aggregate out of its bounds",
        report_class="invariant violation",
    ),
    Kind(
        CONTRADICTORY_ORDER,
        "graph",
        KEY,
        "contradictory-order",
        "(store, key) with an effect that carries an acknowledged, versioned source write",
        "store applied a key's writes in an order contradicting the source's",
        report_class="contradictory order",
        diagram=4,
    ),
)

BY_NAME: dict[str, Kind] = {k.name: k for k in TABLE}


def by_checker() -> dict[str, tuple[str, ...]]:
    """checker -> its kinds, checkers and kinds in the table's order."""
    out: dict[str, list[str]] = {}
    for k in TABLE:
        out.setdefault(k.checker, []).append(k.name)
    return {c: tuple(kinds) for c, kinds in out.items()}


def names(**columns: object) -> tuple[str, ...]:
    """The names of the kinds whose `columns` have the given values, in the table's
    order: names(breaks_convergence=True)."""
    return tuple(
        k.name for k in TABLE if all(getattr(k, col) == value for col, value in columns.items())
    )
