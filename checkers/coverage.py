"""How many chances each anomaly kind had in a history: the plain-Python specification.

A chance is one unit the kind's checker judges, one per row it could report (so a kind
never counts more anomalies than chances): driftlab.checkers.kinds.TABLE says each kind's in
words, `CHANCES` here in code, and the keyed pass counts the same in DuckDB
(driftlab.checkers.keyed.coverage). A kind with no chance was not tested by the history: the
verdict (driftlab.checkers.verdict) calls a claim naming it inconclusive.

Observation by a derived store counts however it was recorded: a delivery or an apply,
a direct write, a read during the run (ryw-violation) or a final state read at the end
(the divergence and projection kinds), so a black-box store whose final state was read
is judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from driftlab.checkers import kinds
from driftlab.checkers.keyed.facts import Facts, facts_of
from driftlab.checkers.reference.common import (
    SourceWrites,
    ViewStates,
    final_states,
    in_scope,
    is_arrival,
    is_consumer_delivery,
    is_effect,
    is_source_write,
    scoped,
    view_of,
)
from driftlab.checkers.reference.eventsourcing import PROJECTION_PREFIX, is_log_event
from driftlab.checkers.reference.lost import done_on
from driftlab.checkers.reference.staleness import _is_read
from driftlab.harness.history.schema import (
    LOG_AUDIT,
    SOURCE_STORE,
    Event,
    EventType,
    MsgAction,
    OpPhase,
)

Chances = Callable[[Sequence[Event], Facts], int]


def _msg(e: Event, *actions: MsgAction) -> bool:
    return e.type == EventType.MSG and e.action in actions


def lost_message(events: Sequence[Event], facts: Facts) -> int:
    """(consumer, message): a produce of the message on a channel the consumer (not the
    log audit) is done with."""
    c = facts.consumers
    done = {
        consumer: done_on(c, consumer)
        for consumer in c.delivered_on.keys() | c.marked.keys()
        if consumer != LOG_AUDIT
    }
    pairs = {
        (consumer, e.msg_id)
        for e in events
        if _msg(e, MsgAction.PRODUCE) and e.channel is not None and e.msg_id is not None
        for consumer, channels in done.items()
        if e.channel in channels
    }
    return len(pairs)


def lost_write(events: Sequence[Event], facts: Facts) -> int:
    """(store, write): an `ok` source write of a key and a derived store with effects,
    once the history quiesced."""
    if not facts.writes.quiesced:
        return 0
    writes = [
        e.key for e in events if is_source_write(e) and e.phase == OpPhase.OK and e.key is not None
    ]
    if not facts.views:
        return len(writes) * len(facts.writes.effect_stores)
    return sum(
        1 for key in writes for s in facts.writes.effect_stores if in_scope(s, key, facts.views)
    )


def duplicate_delivery(events: Sequence[Event], facts: Facts) -> int:
    """(consumer, message) delivered at least once (not to the log audit)."""
    return len(
        {(e.consumer, e.msg_id) for e in events if is_consumer_delivery(e) and e.msg_id is not None}
    )


def duplicate_apply(events: Sequence[Event], facts: Facts) -> int:
    """(store, message) applied at least once."""
    return len(
        {
            (e.store, e.msg_id)
            for e in events
            if _msg(e, MsgAction.APPLY) and e.store is not None and e.msg_id is not None
        }
    )


def _at_offsets(events: Sequence[Event]) -> list[Event]:
    """Messages sent or read with their channel and offset."""
    return [
        e
        for e in events
        if _msg(e, MsgAction.PRODUCE, MsgAction.DELIVER)
        and e.msg_id is not None
        and e.channel is not None
        and e.offset is not None
    ]


def duplicate_offset(events: Sequence[Event], facts: Facts) -> int:
    """(message, channel, partition) sent or read there with an offset."""
    return len({(e.msg_id, e.channel, e.partition) for e in _at_offsets(events)})


def _followers(events: Sequence[Event], keep: Callable[[Event], bool], group: Callable) -> int:
    """How many events `keep` keeps follow an earlier one of their group."""
    seen: Counter = Counter(group(e) for e in events if keep(e))
    return sum(n - 1 for n in seen.values())


def reorder_delivery(events: Sequence[Event], facts: Facts) -> int:
    """Versioned consumer deliveries of a key after another to the same instance."""
    return _followers(
        events,
        lambda e: is_consumer_delivery(e) and e.key is not None and e.version is not None,
        lambda e: (e.consumer, e.process, e.key),
    )


def stale_overwrite(events: Sequence[Event], facts: Facts) -> int:
    """Versioned effects on (or observations of) a key of a store after another there;
    of a view key, those with a version or a value of one of its states."""
    events = scoped(events, facts.views)
    states = ViewStates(events, facts.views)

    def versioned(e: Event) -> bool:
        if view_of(e.key, facts.views) is not None:
            return bool(states.versions(e))
        return e.version is not None

    return _followers(
        events,
        lambda e: is_arrival(e) and e.key is not None and versioned(e),
        lambda e: (e.store, e.key),
    )


def polls(events: Sequence[Event], facts: Facts) -> int:
    """Consumer deliveries with an offset after another to the same instance from the
    same channel partition (nonmonotonic-poll, poll-skip)."""
    return _followers(
        events,
        lambda e: is_consumer_delivery(e) and e.channel is not None and e.offset is not None,
        lambda e: (e.consumer, e.process, e.channel, e.partition),
    )


def nonmonotonic_send(events: Sequence[Event], facts: Facts) -> int:
    """Sends with an offset after another of the same producer instance there."""
    return _followers(
        events,
        lambda e: (
            _msg(e, MsgAction.PRODUCE)
            and e.channel is not None
            and e.offset is not None
            and e.process is not None
        ),
        lambda e: (e.process, e.channel, e.partition),
    )


def inconsistent_offset(events: Sequence[Event], facts: Facts) -> int:
    """Offsets of a channel partition at which a message was sent or read."""
    return len({(e.channel, e.partition, e.offset) for e in _at_offsets(events)})


def divergence(events: Sequence[Event], facts: Facts) -> int:
    """(derived store, key) held at the end by the source or the store, both read at the
    end (missing, extra, stale, phantom)."""
    states = final_states(scoped(events, facts.views))
    stores = facts.state_stores | states.keys()
    derived = sorted(stores - {SOURCE_STORE})
    if SOURCE_STORE not in stores or not derived:
        return 0
    source = states.get(SOURCE_STORE, {})
    return sum(
        1
        for s in derived
        for key in source.keys() | states.get(s, {}).keys()
        if in_scope(s, key, facts.views)
    )


def ryw_violation(events: Sequence[Event], facts: Facts) -> int:
    """`ok` reads invoked after their process's own `ok`, versioned source write of the
    key had completed."""
    events = scoped(events, facts.views)
    invoked: dict[tuple[str, str], int] = {}
    own: dict[tuple[str, str], list[int]] = {}
    for e in events:
        if _is_read(e) and e.phase == OpPhase.INVOKE:
            t = invoked.get((e.process, e.op_id))
            invoked[(e.process, e.op_id)] = e.time if t is None else min(t, e.time)
        elif (
            is_source_write(e)
            and e.phase == OpPhase.OK
            and e.key is not None
            and e.version is not None
            and e.process is not None
        ):
            own.setdefault((e.process, e.key), []).append(e.time)
    n = 0
    for r in events:
        if not (_is_read(r) and r.phase == OpPhase.OK):
            continue
        t = invoked.get((r.process, r.op_id))
        if t is not None and any(w <= t for w in own.get((r.process, r.key), ())):
            n += 1
    return n


def projection_mismatch(events: Sequence[Event], facts: Facts) -> int:
    """(projection store, aggregate) with events or a final state there."""
    states = final_states(events)
    projections = sorted(
        s for s in facts.state_stores | states.keys() if s.startswith(PROJECTION_PREFIX)
    )
    logged = {e.key for e in events if is_log_event(e)}
    return sum(len(logged | states.get(p, {}).keys()) for p in projections)


def invariant_violation(events: Sequence[Event], facts: Facts) -> int:
    """Appended events, when the header gives an invariant."""
    if facts.limits is None:
        return 0
    return sum(1 for e in events if is_log_event(e))


def contradictory_order(events: Sequence[Event], facts: Facts) -> int:
    """(store, key) with an effect carrying an `ok`, versioned source write."""
    events = scoped(events, facts.views)
    writes = SourceWrites(events)
    states = ViewStates(events, facts.views)

    def carried(e: Event) -> Event | None:
        return states.carried(e) if view_of(e.key, facts.views) is not None else writes.of(e)

    return len({(e.store, e.key) for e in events if is_effect(e) and carried(e) is not None})


CHANCES: dict[str, Chances] = {
    kinds.LOST_MESSAGE: lost_message,
    kinds.LOST_WRITE: lost_write,
    kinds.DUPLICATE_DELIVERY: duplicate_delivery,
    kinds.DUPLICATE_APPLY: duplicate_apply,
    kinds.DUPLICATE_OFFSET: duplicate_offset,
    kinds.REORDER_DELIVERY: reorder_delivery,
    kinds.STALE_OVERWRITE: stale_overwrite,
    "polls": polls,
    kinds.NONMONOTONIC_SEND: nonmonotonic_send,
    kinds.INCONSISTENT_OFFSET: inconsistent_offset,
    "divergence": divergence,
    kinds.RYW_VIOLATION: ryw_violation,
    kinds.PROJECTION_MISMATCH: projection_mismatch,
    kinds.INVARIANT_VIOLATION: invariant_violation,
    kinds.CONTRADICTORY_ORDER: contradictory_order,
}
"""The chances in a history, given its Facts, of each kind or of the kinds counted
under one name (kinds.Kind.counted_as: "polls", "divergence")."""


def chances(events: Sequence[Event], facts: Facts | None = None) -> dict[str, int]:
    """Every kind's chances in `events` (a whole history, or whole groups of it given
    the whole history's `facts`)."""
    if facts is None:
        facts = facts_of(list(events))
    counted = {name: count(events, facts) for name, count in CHANCES.items()}
    return {kind.name: counted[kind.counted_as] for kind in kinds.TABLE}
