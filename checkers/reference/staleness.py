"""Staleness: read-your-writes violations and the lag of derived stores.

The plain-Python specification of the `staleness` checker of docs/checkers.md: the
`ryw-violation` kind, and the lag metrics reported beside the anomalies.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from driftlab.checkers.anomaly import Anomaly, evidence_json
from driftlab.checkers.kinds import RYW_VIOLATION
from driftlab.checkers.reference.common import (
    SourceWrites,
    ViewStates,
    is_arrival,
    is_source_write,
    order_key,
    scoped,
    view_of,
    views_of,
)
from driftlab.harness.history.schema import Event, EventType, OpPhase

CHECKER = "staleness"
PERCENTILES = {"p50_ms": 0.5, "p95_ms": 0.95, "p99_ms": 0.99}


def check(events: Sequence[Event], views: frozenset[str] | None = None) -> list[Anomaly]:
    """Every `ok` read that returned something older than its process's own write; a
    read of a store on a key out of its scope (`views`, the header's by default) is
    not judged."""
    if views is None:
        views = views_of(events)
    events = scoped(events, views)
    writes = SourceWrites(events)
    invoked: dict[tuple[str, str], Event] = {}
    own: dict[tuple[str, str], list[Event]] = defaultdict(list)
    newest_delete: dict[str, int] = {}
    unsure_delete: set[str] = set()
    for e in events:
        if _is_read(e) and e.phase == OpPhase.INVOKE:
            seen = invoked.get((e.process, e.op_id))
            if seen is None or e.time < seen.time:
                invoked[(e.process, e.op_id)] = e
        elif is_source_write(e) and e.key is not None:
            if e.phase == OpPhase.OK and e.version is not None:
                if e.process is not None:
                    own[(e.process, e.key)].append(e)
                if e.f == "delete":
                    newest_delete[e.key] = max(newest_delete.get(e.key, 0), e.version)
            elif e.phase == OpPhase.INFO and e.f == "delete":
                unsure_delete.add(e.key)

    out: list[Anomaly] = []
    for r in events:
        if not (_is_read(r) and r.phase == OpPhase.OK):
            continue
        inv = invoked.get((r.process, r.op_id))
        done = [w for w in own.get((r.process, r.key), ()) if inv and w.time <= inv.time]
        if not done:
            continue
        mine = max(done, key=lambda w: (w.version, order_key(w)))
        if r.value is not None:
            returned = writes.by_value.get((r.key, r.value))
            if returned is None:
                continue  # an unknown or uncertain value has no place in the order
            seen = returned.version
        elif r.key in unsure_delete:
            continue  # the null may be a delete of unknown version
        else:
            seen = newest_delete.get(r.key, 0)
        if seen >= mine.version:
            continue
        detail = (
            f"{r.process} read {r.key!r} from {r.store} = {r.value!r} (version {seen}) "
            f"after its own write of version {mine.version}"
        )
        evidence = sorted([mine, inv, r], key=order_key)
        out.append(
            Anomaly(
                CHECKER,
                RYW_VIOLATION,
                r.store,
                r.key,
                None,
                r.time,
                detail,
                evidence_json(evidence),
            )
        )
    return out


def _is_read(e: Event) -> bool:
    """A read operation of one key on one store, by a known process."""
    return (
        e.type == EventType.OP
        and e.f == "read"
        and e.key is not None
        and e.store is not None
        and e.process is not None
        and e.op_id is not None
    )


def lag_rows(
    events: Sequence[Event], views: frozenset[str] | None = None
) -> list[tuple[str, int, int]]:
    """(store, ok time, lag in ns) of every `ok` source write that reached a store.

    The lag runs from the write's `ok` to its first effect on the store, or to its first
    observation there (a store driftlab samples from outside); one seen before the `ok`
    (the commit was visible before the client heard of it) counts 0. A view key's
    arrival carries the state ViewStates.carried names (values repeat across its
    versions); a store is timed on the keys of its scope only (`views`, the header's
    by default).
    """
    if views is None:
        views = views_of(events)
    events = scoped(events, views)
    writes = SourceWrites(events)
    states = ViewStates(events, views)
    first: dict[tuple[str, str, int], tuple[int, int]] = {}
    for e in events:
        if not is_arrival(e):
            continue
        w = states.carried(e) if view_of(e.key, views) is not None else writes.of(e)
        if w is None:
            continue
        at = (e.store, w.key, w.version)
        if at not in first or e.time < first[at][1]:
            first[at] = (w.time, e.time)
    return [(store, ok, max(reached - ok, 0)) for (store, _, _), (ok, reached) in first.items()]


def lag_ns(events: Sequence[Event]) -> dict[str, list[int]]:
    """store -> the lag in ns of every `ok` source write that reached it (lag_rows)."""
    out: dict[str, list[int]] = defaultdict(list)
    for store, _, delay in lag_rows(events, views_of(events)):
        out[store].append(delay)
    return dict(out)


def lag(events: Sequence[Event]) -> dict[str, dict[str, float | int]]:
    """{store: {count, p50_ms, p95_ms, p99_ms, max_ms}} over the writes that reached it.

    Percentiles are nearest-rank (an observed value), as the pass's summary computes them.
    """
    out: dict[str, dict[str, float | int]] = {}
    for store, delays in sorted(lag_ns(events).items()):
        ms = sorted(d / 1e6 for d in delays)
        stats: dict[str, float | int] = {"count": len(ms)}
        for name, p in PERCENTILES.items():
            stats[name] = ms[max(math.ceil(p * len(ms)) - 1, 0)]
        stats["max_ms"] = ms[-1]
        out[store] = stats
    return out
