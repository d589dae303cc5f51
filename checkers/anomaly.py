"""The anomaly row every checker returns, in plain Python and in Spark alike.

The kinds and their meaning are specified in docs/checkers.md, each once in
driftlab.checkers.kinds.TABLE.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from driftlab.checkers.kinds import by_checker
from driftlab.harness.history.schema import Event

MAX_EVIDENCE = 20

KINDS: dict[str, tuple[str, ...]] = by_checker()
"""checker -> its kinds (driftlab.checkers.kinds.TABLE)."""
ALL_KINDS: tuple[str, ...] = tuple(k for kinds in KINDS.values() for k in kinds)

ANOMALY_COLUMNS = ("checker", "kind", "store", "key", "consumer", "time", "detail", "evidence")
SPARK_DDL = (
    "checker string, kind string, store string, key string, consumer string, "
    "time bigint, detail string, evidence string"
)


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One anomaly with the evidence behind it."""

    checker: str
    kind: str
    store: str | None
    key: str | None
    consumer: str | None
    time: int
    detail: str
    evidence: str  # JSON array of event dicts

    def identity(self) -> tuple[str, str, str | None, str | None, str | None, int]:
        """What reference and Spark must agree on (detail and evidence may differ)."""
        return (self.checker, self.kind, self.store, self.key, self.consumer, self.time)


def evidence_json(events: Iterable[Event]) -> str:
    """Serialize at most MAX_EVIDENCE events as the evidence column."""
    out = []
    for i, e in enumerate(events):
        if i >= MAX_EVIDENCE:
            break
        out.append(e.to_dict())
    return json.dumps(out, separators=(",", ":"), sort_keys=True)


def sample_rank(a: Anomaly) -> tuple[int, int, str, str, str, str]:
    """Where an anomaly stands in its kind's sample: a stable hash of its identity, so
    that the examples a report shows spread over the run and are the same every time,
    whatever the partitioning (ties, rare, in identity order)."""
    ident = f"{a.time}|{a.store}|{a.key}|{a.consumer}"
    return (
        zlib.crc32(ident.encode()),
        a.time,
        a.kind,
        a.store or "",
        a.key or "",
        a.consumer or "",
    )
