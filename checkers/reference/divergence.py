"""Divergence: does every derived store end holding what the source holds?

The plain-Python specification of the `divergence` kinds of docs/checkers.md: `missing`,
`extra`, `stale` and `phantom`, judged per (store, key) on the final `state` events; of a
view store also `phantom` from the observer's reads (a state the view never had, shown
for a while and repaired before the end).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from driftlab.checkers.anomaly import MAX_EVIDENCE, Anomaly, evidence_json
from driftlab.checkers.kinds import EXTRA, MISSING, PHANTOM, STALE
from driftlab.checkers.reference.common import (
    committed_values,
    final_states,
    in_scope,
    is_effect,
    is_observation,
    is_source_write,
    order_key,
    scoped,
    view_of,
    views_of,
)
from driftlab.harness.history.schema import SOURCE_STORE, Event, OpPhase

CHECKER = "divergence"


def check(
    events: Sequence[Event],
    state_stores: Iterable[str] | None = None,
    views: frozenset[str] | None = None,
    t0: int | None = None,
) -> list[Anomaly]:
    """Every (store, key) whose final value differs from the source's, classified, and
    every view key a view store was seen holding in a state its view never had.

    `state_stores` are the stores with a `state` event anywhere in the history, when
    `events` hold only some keys (every event of each); `views` the view stores (the
    header's by default), each judged on its own keys only; `t0` the history's first
    event's time (by default that of `events`), which a read's time is counted from.
    """
    if views is None:
        views = views_of(events)
    events = scoped(events, views)
    states = final_states(events)
    for store in state_stores or ():
        states.setdefault(store, {})
    source = states.pop(SOURCE_STORE, None)
    if source is None or not states:
        return []
    committed = committed_values(events)
    history = _key_history(events, views)
    out: list[Anomaly] = []
    if t0 is None:
        t0 = min((e.time for e in events), default=0)
    judged: dict[tuple[str, str], list[Event]] = {}
    for store in sorted(states):
        held = states[store]
        for key in sorted(source.keys() | held.keys()):
            if not in_scope(store, key, views):
                continue
            src, der = source.get(key), held.get(key)
            judged[(store, key)] = [e for e in (src, der) if e is not None]
            if src is not None and der is not None and src.value == der.value:
                continue
            if der is None:
                kind = MISSING
                detail = f"{store} lacks {key!r}, the source holds {src.value!r}"
            elif src is None:
                kind = EXTRA
                detail = f"{store} holds {key!r} = {der.value!r}, the source does not hold it"
            elif der.value in committed.get(key, ()):
                kind = STALE
                detail = (
                    f"{store} holds {key!r} = {der.value!r}, an older committed value; "
                    f"the source holds {src.value!r}"
                )
            else:
                kind = PHANTOM
                detail = (
                    f"{store} holds {key!r} = {der.value!r}, never committed at the source; "
                    f"the source holds {src.value!r}"
                )
            shown = der if der is not None else src
            finals = [e for e in (src, der) if e is not None]
            writes = history.get((SOURCE_STORE, key), []) + history.get((store, key), [])
            out.append(
                Anomaly(
                    CHECKER, kind, store, key, None, shown.time, detail, _evidence(finals, writes)
                )
            )
    if views:
        for a in out:
            if a.kind == PHANTOM:
                judged.pop((a.store, a.key), None)
        out += _torn(events, views, committed, history, judged, t0)
    return out


def _torn(
    events: Sequence[Event],
    views: frozenset[str],
    committed: dict[str, set[str]],
    history: dict[tuple[str, str], list[Event]],
    judged: dict[tuple[str, str], list[Event]],
    t0: int,
) -> list[Anomaly]:
    """One `phantom` per (view store, key) of `judged` (those judged on their final
    states, but for a phantom final state, to their final states) whose store was read
    holding a value no `ok` or `info` state of its view has: a torn document may be
    repaired before the end, and the final states miss it. `events` are scoped, so an
    observation of a view key is one of its own store."""
    seen: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in events:
        if (
            is_observation(e)
            and view_of(e.key, views) is not None
            and e.value not in committed.get(e.key, ())
        ):
            seen[(e.store, e.key)].append(e)
    out: list[Anomaly] = []
    for (store, key), reads in sorted(seen.items()):
        finals = judged.get((store, key))
        if finals is None:
            continue
        reads.sort(key=order_key)
        read = reads[0]
        more = f" ({len(reads)} such reads)" if len(reads) > 1 else ""
        detail = (
            f"{store} showed {key!r} = {read.value!r} at {(read.time - t0) / 1e9:.3f}s, "
            f"no state of the view{more}"
        )
        states = sorted(history.get((SOURCE_STORE, key), []), key=order_key)
        before = [s for s in states if order_key(s) <= order_key(read)]
        after = [s for s in states if order_key(s) > order_key(read)]
        room = (MAX_EVIDENCE - 1 - len(finals)) // 2
        evidence = evidence_json([read, *before[-room:], *after[:room], *finals])
        out.append(Anomaly(CHECKER, PHANTOM, store, key, None, read.time, detail, evidence))
    return out


def _key_history(
    events: Iterable[Event], views: frozenset[str]
) -> dict[tuple[str, str], list[Event]]:
    """(store, key) -> the writes behind its final value: source writes that may have
    committed (`ok` and `info`) under `source`, effects under the derived store, and of
    a view store the observer's samples too (what it showed during the run)."""
    out: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in events:
        if (
            (is_source_write(e) and e.phase in (OpPhase.OK, OpPhase.INFO))
            or is_effect(e)
            or (views and is_observation(e) and view_of(e.key, views) is not None)
        ):
            out[(e.store, e.key)].append(e)
    return out


def _evidence(finals: list[Event], writes: list[Event]) -> str:
    """The final states, then the latest writes of the key on both sides in time order."""
    latest = sorted(writes, key=order_key)[-(MAX_EVIDENCE - len(finals)) :]
    return evidence_json(finals + latest)
