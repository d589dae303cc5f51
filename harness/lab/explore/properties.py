"""The properties the search puts to the test, one or more per setup, from docs/claims.md.

A property names the anomaly kinds that would break it. `predicted` says what the
claims table expects: `holds` (no schedule breaks it: a break is a finding of the
simulator or a bug of the setup) or `fails` (the search must find a breaking schedule,
and shrinks it to the smallest).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from driftlab.checkers.anomaly import KINDS, Anomaly
from driftlab.checkers.kinds import (
    DUPLICATE_APPLY,
    DUPLICATE_DELIVERY,
    INVARIANT_VIOLATION,
    LOST_MESSAGE,
    LOST_WRITE,
    MISSING,
    REORDER_DELIVERY,
    STALE_OVERWRITE,
    names,
)
from driftlab.harness.history.schema import Event
from driftlab.harness.lab.explore.sim.tally import Finding

DIVERGENCE = frozenset(names(final_state=True))
REFERENCE_CHECKERS: tuple[str, ...] = tuple(KINDS)
"""The checkers of docs/checkers.md, each a module `driftlab.checkers.reference.<name>`."""


@dataclass(frozen=True, slots=True)
class Property:
    """`no anomaly of these kinds (for this consumer)`, with the claims' prediction."""

    name: str
    setup: str
    claim: str
    text: str
    predicted: Literal["holds", "fails"]
    kinds: frozenset[str]
    consumer: str | None = None

    def broken_by(self, findings: Iterable[Finding]) -> bool:
        """Whether the simulator's tallied findings break the property."""
        return any(
            kind in self.kinds and (self.consumer is None or consumer == self.consumer)
            for kind, _store, _key, consumer in findings
        )

    def breaking(self, anomalies: Iterable[Anomaly]) -> list[Anomaly]:
        """The reference checkers' anomalies that break the property."""
        return [
            a
            for a in anomalies
            if a.kind in self.kinds and (self.consumer is None or a.consumer == self.consumer)
        ]


def _p(
    name: str,
    setup: str,
    claim: str,
    text: str,
    predicted: Literal["holds", "fails"],
    kinds: Iterable[str],
    consumer: str | None = None,
) -> Property:
    return Property(name, setup, claim, text, predicted, frozenset(kinds), consumer)


LOSS = names(checker="lost")
PROPERTIES: tuple[Property, ...] = (
    _p(
        "dual-write-converges",
        "dual-write",
        "C1",
        "the cache ends equal to the db",
        "fails",
        DIVERGENCE,
    ),
    _p(
        "dual-write-crash-loses-keys",
        "dual-write-crash",
        "C2",
        "every key of the db reaches the cache",
        "fails",
        {MISSING},
    ),
    _p(
        "cdc-converges",
        "cdc",
        "C3",
        "no loss, no divergence, no reorder, no double effect: only redelivery",
        "holds",
        {*LOSS, *DIVERGENCE, REORDER_DELIVERY, STALE_OVERWRITE, DUPLICATE_APPLY},
    ),
    _p(
        "cdc-redelivers",
        "cdc",
        "C3",
        "a crash never makes the consumer receive a message twice",
        "fails",
        {DUPLICATE_DELIVERY},
    ),
    _p(
        "commit-before-apply-loses",
        "cdc-commit-before",
        "C4",
        "every db write reaches the cache",
        "fails",
        {LOST_WRITE},
    ),
    _p(
        "counter-double-counts",
        "cdc-counter",
        "C5",
        "every message is counted once",
        "fails",
        {DUPLICATE_APPLY},
    ),
    _p(
        "outbox-converges",
        "outbox",
        "C14",
        "no loss, no divergence, no reorder",
        "holds",
        {*LOSS, *DIVERGENCE, REORDER_DELIVERY, STALE_OVERWRITE},
    ),
    _p(
        "amqp-keeps-order",
        "amqp",
        "C7",
        "workers receive each key's versions in order",
        "fails",
        {REORDER_DELIVERY},
    ),
    _p(
        "slow-consumer-loses",
        "bounded-log",
        "C6",
        "the slow consumer receives every message",
        "fails",
        {LOST_MESSAGE},
        "slow",
    ),
    _p(
        "fast-consumer-keeps-all",
        "bounded-log",
        "C6",
        "the fast consumer receives every message",
        "holds",
        {LOST_MESSAGE},
        "fast",
    ),
    _p(
        "rebuild-equals-source",
        "compacted-log",
        "C9",
        "a store rebuilt from the compacted log equals the db",
        "holds",
        DIVERGENCE,
    ),
    _p(
        "unchecked-invariant",
        "event-sourced",
        "C12",
        "the balance never goes below 0",
        "fails",
        {INVARIANT_VIOLATION},
    ),
    _p(
        "checked-invariant",
        "event-sourced-checked",
        "C12",
        "the balance never goes below 0",
        "holds",
        {INVARIANT_VIOLATION},
    ),
)


def properties_of(setup: str) -> list[Property]:
    """The properties of a setup, in table order."""
    return [p for p in PROPERTIES if p.setup == setup]


def available_checkers() -> dict[str, object]:
    """The reference checker modules present in checkers/reference, by name."""
    found = {}
    for name in REFERENCE_CHECKERS:
        try:
            found[name] = importlib.import_module(f"driftlab.checkers.reference.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"driftlab.checkers.reference.{name}":
                raise
    return found


def reference_anomalies(events: list[Event]) -> tuple[list[Anomaly], list[str]]:
    """Every reference checker's anomalies on a history, and the checkers missing."""
    checkers = available_checkers()
    anomalies: list[Anomaly] = []
    for module in checkers.values():
        anomalies.extend(module.check(events))  # type: ignore[attr-defined]
    missing = [n for n in REFERENCE_CHECKERS if n not in checkers]
    return anomalies, missing
