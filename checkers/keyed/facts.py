"""The few history-wide facts that per-group checks need, gathered before the keyed pass.

Every check of docs/checkers.md is local to a group of events (a key, a channel
partition, a message) except for a handful of small facts about the whole run: who
consumes which channel and is done with it, which derived stores received effects or
hold final states, whether the run quiesced, the invariant and the view stores of its
header, and the span of its clock. `facts_of` computes them from events in plain Python
(the specification); the Spark pass gathers the same rows in one aggregation job
(driftlab.checkers.keyed.spark).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from driftlab.checkers.reference.common import is_effect, views_of
from driftlab.checkers.reference.eventsourcing import Bounds, bounds
from driftlab.checkers.reference.lost import Consumers, WriteFacts
from driftlab.harness.history.schema import COLUMNS, Event, EventType, Mark, MsgAction

DELIVER, DONE, EFFECT, QUIESCED, STATE, HEADER, OTHER = "d", "m", "e", "q", "s", "h", "x"
"""Tags of the fact rows: (tag, a, b, c) with a = consumer, b = channel or store,
c = a header event as JSON."""


@dataclass(frozen=True)
class Facts:
    """What every group's checks need to know of the whole history."""

    consumers: Consumers
    writes: WriteFacts
    state_stores: frozenset[str]
    limits: Bounds | None
    t0_ns: int
    t1_ns: int
    limits_error: str | None = None
    """Why the header's invariant could not be read: the eventsourcing checker fails
    with it, as the reference does, and the other checkers go on."""
    views: frozenset[str] = frozenset()
    """The view stores the header names (`params.views`): each judged on its keys only."""
    ordered: bool = False
    """Whether the history's order is order_key's: every event has a writer and a seq,
    and (time, writer, seq) rises with the position, as driftlab writes a history. The
    sieve then orders a group's events by position alone, not by the five keys."""


def in_order(keys: Iterable[tuple[int, str | None, int | None]]) -> bool:
    """Whether (time, writer, seq) keys, in the history's order, have no unset writer or
    seq and rise strictly (Facts.ordered)."""
    last = None
    for key in keys:
        if key[1] is None or key[2] is None or (last is not None and key <= last):
            return False
        last = key
    return True


def tag_of(e: Event) -> tuple[str, str | None, str | None]:
    """The fact row (tag, a, b) an event contributes, as the Spark job tags it."""
    if e.type == EventType.MSG and e.action == MsgAction.DELIVER:
        if e.consumer is not None and e.channel is not None:
            return DELIVER, e.consumer, e.channel
    elif e.type == EventType.MARK and e.kind == Mark.CONSUMER_DONE and e.consumer is not None:
        return DONE, e.consumer, e.channel
    elif e.type == EventType.MARK and e.kind == Mark.QUIESCED:
        return QUIESCED, None, None
    elif e.type == EventType.STATE and e.store is not None:
        return STATE, None, e.store
    elif e.type == EventType.HEADER:
        return HEADER, None, None
    if e.key is not None and is_effect(e):
        return EFFECT, None, e.store
    return OTHER, None, None


def facts_from_rows(
    rows: Iterable[tuple[str, str | None, str | None]],
    headers: Iterable[Event],
    t0: int,
    t1: int,
    ordered: bool = False,
) -> Facts:
    """Facts from distinct fact rows (tag, a, b) and the history's header events, of a
    history whose order is order_key's if `ordered`."""
    delivered_on: dict[str, set[str]] = defaultdict(set)
    marked: dict[str, set[str]] = defaultdict(set)
    done_everywhere: set[str] = set()
    effect_stores: set[str] = set()
    state_stores: set[str] = set()
    quiesced = False
    for tag, a, b in rows:
        if tag == DELIVER:
            delivered_on[a].add(b)
        elif tag == DONE:
            if b is None:
                done_everywhere.add(a)
            else:
                marked[a].add(b)
        elif tag == EFFECT:
            effect_stores.add(b)
        elif tag == STATE:
            state_stores.add(b)
        elif tag == QUIESCED:
            quiesced = True
    headers = list(headers)
    try:
        limits, limits_error = bounds(headers), None
    except ValueError as e:
        limits, limits_error = None, str(e)
    return Facts(
        Consumers(
            {c: frozenset(v) for c, v in delivered_on.items()},
            {c: frozenset(v) for c, v in marked.items()},
            frozenset(done_everywhere),
        ),
        WriteFacts(frozenset(effect_stores), quiesced),
        frozenset(state_stores),
        limits,
        t0,
        t1,
        limits_error,
        views_of(headers),
        ordered,
    )


def facts_of(events: list[Event]) -> Facts:
    """The Facts of an in-memory history (the plain-Python specification)."""
    rows = {tag_of(e) for e in events}
    headers = [e for e in events if e.type == EventType.HEADER]
    times = [e.time for e in events]
    ordered = in_order((e.time, e.writer, e.seq) for e in events)
    return facts_from_rows(rows, headers, min(times, default=0), max(times, default=0), ordered)


def header_from_json(text: str) -> Event:
    """A header event from the JSON object the Spark job serialized it to."""
    data = json.loads(text)
    return Event(**{c: data.get(c) for c in COLUMNS})
