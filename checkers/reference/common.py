"""Vocabulary of docs/checkers.md shared by the reference checkers (plain Python).

Shared between checkers: add helpers with small edits, keep the existing ones stable.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from driftlab.checkers.anomaly import Anomaly, evidence_json
from driftlab.harness.history.schema import (
    LOG_AUDIT,
    OBSERVER,
    SOURCE_STORE,
    Event,
    EventType,
    MsgAction,
    OpPhase,
)

WRITE_FS = frozenset({"write", "delete", "increment"})
"""The `f` of an operation that writes a store."""


def order_key(e: Event) -> tuple[int, bool, str, bool, int]:
    """Time order of events; equal times keep recorded order (writer, seq).

    Unset writer or seq sort first, as Spark's ascending sort puts nulls first.
    """
    return (e.time, e.writer is not None, e.writer or "", e.seq is not None, e.seq or 0)


def is_source_write(e: Event) -> bool:
    """An operation writing the source, in any phase."""
    return e.type == EventType.OP and e.store == SOURCE_STORE and e.f in WRITE_FS


def is_consumer_delivery(e: Event) -> bool:
    """A `deliver` to a consumer: the log audit's reads stand for the log itself, and are
    judged as no consumer's (docs/checkers.md)."""
    return (
        e.type == EventType.MSG
        and e.action == MsgAction.DELIVER
        and e.consumer is not None
        and e.consumer != LOG_AUDIT
    )


def is_effect(e: Event) -> bool:
    """A write reaching a derived store: an `apply` message or a direct `ok` write."""
    if e.store is None or e.store == SOURCE_STORE:
        return False
    if e.type == EventType.MSG:
        return e.action == MsgAction.APPLY
    return e.type == EventType.OP and e.phase == OpPhase.OK and e.f in WRITE_FS


def is_observation(e: Event) -> bool:
    """driftlab's sighting of a value in a derived store it samples from outside: an
    `ok` read of the OBSERVER with a value (the store showed it from then on)."""
    return (
        e.type == EventType.OP
        and e.process == OBSERVER
        and e.f == "read"
        and e.phase == OpPhase.OK
        and e.store is not None
        and e.store != SOURCE_STORE
        and e.key is not None
        and e.value is not None
    )


def is_arrival(e: Event) -> bool:
    """A write seen in a derived store: an effect, or an observation (the lag and
    stale-overwrite judge both)."""
    return is_effect(e) or is_observation(e)


def header_params(events: Iterable[Event]) -> Iterator[dict[str, Any]]:
    """The `params` of each run header, in time order (an unreadable header skipped)."""
    for h in sorted((e for e in events if e.type == EventType.HEADER), key=order_key):
        try:
            params = json.loads(h.extra or "{}").get("params") or {}
        except (json.JSONDecodeError, AttributeError):
            continue  # not a run header: the recorder writes JSON objects
        if isinstance(params, dict):
            yield params


def views_of(events: Iterable[Event]) -> frozenset[str]:
    """The view stores of a history: `params.views` of the first header (time order)
    that names them (docs/checkers.md, View stores); none without one."""
    for params in header_params(events):
        views = params.get("views")
        if isinstance(views, list) and views:
            return frozenset(str(v) for v in views)
    return frozenset()


def view_of(key: str | None, views: frozenset[str]) -> str | None:
    """The view store whose states `key` names (`S/<entity key>`), or None."""
    if not views or key is None:
        return None
    head, slash, _ = key.partition("/")
    return head if slash and head in views else None


def in_scope(store: str | None, key: str | None, views: frozenset[str]) -> bool:
    """Whether `store` is judged on `key`: a view store S only on keys `S/...`, and
    those keys only against S (and the source); every pair without views."""
    if not views or store is None or store == SOURCE_STORE or key is None:
        return True
    view = view_of(key, views)
    return store == view if view is not None else store not in views


def scoped(events: Sequence[Event], views: frozenset[str]) -> Sequence[Event]:
    """`events` without those of a derived store on a key out of its scope."""
    if not views:
        return events
    return [e for e in events if in_scope(e.store, e.key, views)]


class ViewStates:
    """The committed states of view keys (`ok` source writes with a version), whose
    values may repeat across versions: what an arrival without a version may carry."""

    def __init__(self, events: Iterable[Event], views: frozenset[str]) -> None:
        self.states: dict[tuple[str, str | None], list[Event]] = defaultdict(list)
        if not views:
            return  # no view key: a history without views pays nothing
        by_key: dict[str, list[Event]] = defaultdict(list)
        for e in events:
            if (
                is_source_write(e)
                and e.phase == OpPhase.OK
                and e.version is not None
                and view_of(e.key, views) is not None
            ):
                by_key[e.key].append(e)
        for key, writes in by_key.items():
            for w in sorted(writes, key=lambda w: w.version):
                self.states[(key, w.value)].append(w)

    def versions(self, arrival: Event) -> list[int]:
        """The versions an arrival of a view key may show, ascending: its own version,
        else those of the states with its value (none for a value the view never had)."""
        if arrival.version is not None:
            return [arrival.version]
        if arrival.value is None:
            return []
        return [w.version for w in self.states.get((arrival.key, arrival.value), ())]

    def carried(self, arrival: Event) -> Event | None:
        """The state an arrival carries: the state of its version if it has one (a
        delete, which has no value, only so); else, of the states with its value, the
        last whose `ok` came at or before it, or the first (one seen before its `ok`)."""
        found = self.states.get((arrival.key, arrival.value), ())
        if arrival.version is not None:
            exact = next((w for w in found if w.version == arrival.version), None)
            if exact is not None or arrival.value is None:
                return exact
        if not found or arrival.value is None:
            return None
        done = [w for w in found if w.time <= arrival.time]
        return max(done, key=order_key) if done else found[0]


def least_at_or_above(versions: list[int], floor: int | None) -> int | None:
    """The least of the ascending `versions` at or above `floor` (any, without one)."""
    if not versions:
        return None
    if floor is None:
        return versions[0]
    i = bisect_left(versions, floor)
    return versions[i] if i < len(versions) else None


def final_states(events: Iterable[Event]) -> dict[str, dict[str, Event]]:
    """store -> key -> the `state` event of the key's final value.

    Every store with a `state` event is present, even when it holds no key (a `state`
    with a null key marks a store read empty). A key's last `state` event (time order)
    wins; a null value there means the store does not hold the key.
    """
    last: dict[str, dict[str, Event]] = {}
    for e in sorted((e for e in events if e.type == EventType.STATE), key=order_key):
        if e.store is None:
            continue
        held = last.setdefault(e.store, {})
        if e.key is not None:
            held[e.key] = e
    return {
        store: {k: e for k, e in held.items() if e.value is not None}
        for store, held in last.items()
    }


def committed_values(events: Iterable[Event]) -> dict[str, set[str]]:
    """key -> values the source may hold or have held: `ok` and `info` source writes."""
    out: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if (
            is_source_write(e)
            and e.phase in (OpPhase.OK, OpPhase.INFO)
            and e.key is not None
            and e.value is not None
        ):
            out[e.key].add(e.value)
    return out


class SourceWrites:
    """The `ok` source writes with a version, found by what an effect carries."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.by_value: dict[tuple[str, str], Event] = {}
        self.deletes: dict[tuple[str, int], Event] = {}
        for e in events:
            if not (is_source_write(e) and e.phase == OpPhase.OK):
                continue
            if e.key is None or e.version is None:
                continue
            if e.value is not None:
                self.by_value[(e.key, e.value)] = e
            elif e.f == "delete":
                self.deletes[(e.key, e.version)] = e

    def of(self, effect: Event) -> Event | None:
        """The source write an effect (or a read) carries: by (key, value), and for a
        delete, which has no value, by (key, version)."""
        if effect.key is None:
            return None
        if effect.value is not None:
            return self.by_value.get((effect.key, effect.value))
        if effect.version is None:
            return None
        return self.deletes.get((effect.key, effect.version))


def found_at(
    checker: str,
    kind: str,
    at: Event,
    detail: str,
    evidence: Iterable[Event],
    *,
    store: str | None = None,
    consumer: str | None = None,
) -> Anomaly:
    """An anomaly shown by the event `at` (its key and time), with `evidence`."""
    return Anomaly(
        checker=checker,
        kind=kind,
        store=store,
        key=at.key,
        consumer=consumer,
        time=at.time,
        detail=detail,
        evidence=evidence_json(evidence),
    )
