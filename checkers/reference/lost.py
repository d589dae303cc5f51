"""Lost: did every message reach each consumer done with its channel, and every write
each derived store?

The plain-Python specification of `lost-message` and `lost-write` of docs/checkers.md,
and of the notes `unseen-message` and `recovered-write`.

A consumer C consumes a channel X when it has a `deliver` on X or a `consumer-done` mark
for X; it is done on X when it has a `consumer-done` mark for X, or one without a
channel (done on every channel it has a `deliver` on).

Where a lost message or write went: the log audit (consumer LOG_AUDIT, the broker's log
read back after quiescence) is no consumer and loses nothing; its reads say whether a
lost message is still in the log (the consumer skipped it) or not (the broker lost it,
or retention or compaction removed it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from driftlab.checkers.anomaly import Anomaly
from driftlab.checkers.kinds import LOST_MESSAGE, LOST_WRITE
from driftlab.checkers.reference.common import (
    found_at,
    in_scope,
    is_effect,
    is_source_write,
    order_key,
    scoped,
    views_of,
)
from driftlab.harness.history.schema import (
    LOG_AUDIT,
    SOURCE_STORE,
    Event,
    EventType,
    Mark,
    MsgAction,
    OpPhase,
)

CHECKER = "lost"


def check(events: Sequence[Event]) -> list[Anomaly]:
    """Every lost message (per consumer) and every lost write (per derived store)."""
    return messages(events).lost + writes(events).lost


def notes(events: Sequence[Event]) -> dict[str, int]:
    """Counts of the notes: `unseen-message` and `recovered-write`."""
    return {
        "unseen-message": messages(events).unseen,
        "recovered-write": writes(events).recovered,
    }


@dataclass
class Outcome:
    """Lost rows and the counts of the notes, of a whole history or of one group."""

    lost: list[Anomaly] = field(default_factory=list)
    unseen: int = 0
    recovered: int = 0


@dataclass(frozen=True)
class Consumers:
    """Who consumes what: the history-wide facts behind every message's verdict."""

    delivered_on: dict[str, frozenset[str]]
    """consumer -> the channels it has a `deliver` on"""
    marked: dict[str, frozenset[str]]
    """consumer -> the channels of its `consumer-done` marks"""
    done_everywhere: frozenset[str]
    """consumers with a `consumer-done` mark without a channel"""


@dataclass(frozen=True)
class WriteFacts:
    """The history-wide facts behind every write's verdict."""

    effect_stores: frozenset[str]
    """derived stores with an effect on some key"""
    quiesced: bool


def _is(e: Event, action: MsgAction) -> bool:
    return e.type == EventType.MSG and e.action == action


def consumers(events: Iterable[Event]) -> Consumers:
    """The Consumers facts of a history."""
    delivered_on: dict[str, set[str]] = defaultdict(set)
    marked: dict[str, set[str]] = defaultdict(set)
    done_everywhere: set[str] = set()
    for e in events:
        if _is(e, MsgAction.DELIVER) and e.consumer is not None:
            if e.channel is not None:
                delivered_on[e.consumer].add(e.channel)
        elif e.type == EventType.MARK and e.kind == Mark.CONSUMER_DONE and e.consumer is not None:
            if e.channel is None:
                done_everywhere.add(e.consumer)
            else:
                marked[e.consumer].add(e.channel)
    return Consumers(
        {c: frozenset(v) for c, v in delivered_on.items()},
        {c: frozenset(v) for c, v in marked.items()},
        frozenset(done_everywhere),
    )


def write_facts(events: Iterable[Event]) -> WriteFacts:
    """The WriteFacts of a history."""
    stores: set[str] = set()
    quiesced = False
    for e in events:
        if e.key is not None and is_effect(e):
            stores.add(e.store)
        elif e.type == EventType.MARK and e.kind == Mark.QUIESCED:
            quiesced = True
    return WriteFacts(frozenset(stores), quiesced)


def messages(events: Sequence[Event], facts: Consumers | None = None) -> Outcome:
    """Lost messages and unseen ones; `facts` of the whole history when `events` hold
    only some messages (every event of each)."""
    if facts is None:
        facts = consumers(events)
    delivered: set[tuple[str, str]] = set()
    produced: dict[str, list[Event]] = defaultdict(list)
    in_log: dict[str, list[Event]] = defaultdict(list)
    for e in sorted(events, key=order_key):
        if _is(e, MsgAction.DELIVER) and e.consumer is not None:
            if e.msg_id is not None:
                delivered.add((e.consumer, e.msg_id))
                if e.consumer == LOG_AUDIT:
                    in_log[e.msg_id].append(e)
        elif _is(e, MsgAction.PRODUCE) and e.channel is not None and e.msg_id is not None:
            produced[e.msg_id].append(e)
    out = Outcome()
    audited = done_on(facts, LOG_AUDIT)
    for consumer in sorted(facts.delivered_on.keys() | facts.marked.keys()):
        consumes = facts.delivered_on.get(consumer, frozenset()) | facts.marked.get(
            consumer, frozenset()
        )
        done = done_on(facts, consumer)
        for msg_id, produces in produced.items():
            if (consumer, msg_id) in delivered:
                continue
            ends = [p for p in produces if p.channel in done]
            # The log audit is not judged: what it did not read is where a loss went.
            if ends and consumer != LOG_AUDIT:
                first = ends[0]
                where, seen = _where(first.channel, in_log[msg_id], audited)
                detail = (
                    f"{msg_id} produced on {first.channel}, never delivered to {consumer}{where}"
                )
                out.lost.append(
                    found_at(
                        CHECKER, LOST_MESSAGE, first, detail, [*ends, *seen], consumer=consumer
                    )
                )
            elif not ends and any(p.channel in consumes for p in produces):
                out.unseen += 1
    return out


IN_LOG, NOT_IN_LOG = "in the log", "not in the log"
"""The words of a lost message's detail that say where it went (docs/checkers.md)."""


def where_lost(detail: str) -> str | None:
    """IN_LOG, NOT_IN_LOG or None (not known) for the detail of a lost message or write."""
    if f"still {IN_LOG} at " in detail:
        return IN_LOG
    if f"{NOT_IN_LOG} read back after quiescence" in detail:
        return NOT_IN_LOG
    return None


def done_on(facts: Consumers, consumer: str) -> frozenset[str]:
    """The channels `consumer` is done on."""
    marked = facts.marked.get(consumer, frozenset())
    if consumer in facts.done_everywhere:
        return marked | facts.delivered_on.get(consumer, frozenset())
    return marked


def _positions(reads: list[Event]) -> str:
    """Where the log audit read a message: channel[partition]@offset, the first three."""
    return ", ".join(f"{e.channel}[{e.partition}]@{e.offset}" for e in reads[:3])


def _where(
    channel: str | None, reads: list[Event], audited: frozenset[str]
) -> tuple[str, list[Event]]:
    """The end of a lost message's detail that says where it went, and the log audit's
    reads of it: still in the log, gone from a log read back whole, or nothing known
    (its channel was not audited)."""
    if reads:
        return f"; still {IN_LOG} at {_positions(reads)}: the consumer skipped it", reads
    if channel in audited:
        return (
            f"; {NOT_IN_LOG} read back after quiescence: the broker lost it or "
            "retention or compaction removed it",
            [],
        )
    return "", []


def _carried(e: Event) -> tuple[str | None, str | None, int | None]:
    """What identifies the write an event carries: (key, value), and for a delete, which
    has no value, (key, version)."""
    return (e.key, e.value, e.version if e.value is None else None)


def writes(
    events: Sequence[Event],
    facts: WriteFacts | None = None,
    views: frozenset[str] | None = None,
) -> Outcome:
    """Lost writes and recovered ones; `facts` of the whole history when `events` hold
    only some keys (every event of each); a write of a view key is judged against its
    view store only (`views`, the header's by default)."""
    if facts is None:
        facts = write_facts(events)
    if views is None:
        views = views_of(events)
    events = scoped(events, views)
    reached: set[tuple[str, tuple[str | None, str | None, int | None]]] = set()
    logged: dict[tuple[str | None, str | None, int | None], list[Event]] = defaultdict(list)
    for e in sorted(events, key=order_key):
        if e.key is None:
            continue
        if is_effect(e) or (
            _is(e, MsgAction.SKIP) and e.store is not None and e.store != SOURCE_STORE
        ):
            reached.add((e.store, _carried(e)))
        elif _is(e, MsgAction.DELIVER) and e.consumer == LOG_AUDIT:
            logged[_carried(e)].append(e)
    audited_keys = {carried[0] for carried in logged}
    anywhere = {carried for _, carried in reached}
    effect_stores, quiesced = facts.effect_stores, facts.quiesced
    out = Outcome()
    for w in sorted(events, key=order_key):
        if not is_source_write(w) or w.key is None:
            continue
        if w.phase == OpPhase.INFO and _carried(w) in anywhere:
            out.recovered += 1
        if w.phase != OpPhase.OK or not quiesced:
            continue
        for store in sorted(effect_stores):
            if not in_scope(store, w.key, views):
                continue
            if (store, _carried(w)) not in reached:
                where, seen = _write_where(logged.get(_carried(w), []), w.key in audited_keys)
                detail = f"{w.f} of {w.key!r} = {w.value!r} never reached {store}{where}"
                out.lost.append(found_at(CHECKER, LOST_WRITE, w, detail, [w, *seen], store=store))
    return out


def _write_where(reads: list[Event], key_audited: bool) -> tuple[str, list[Event]]:
    """As `_where`, for a lost write: the log audit's reads of the change that carries
    it. Its key's group holds no consumer-done mark, so a write is known to be gone from
    the log only when the audit read other changes of its key."""
    if reads:
        return (
            f"; its change is still {IN_LOG} at {_positions(reads)}: the consumer skipped it",
            reads,
        )
    if key_audited:
        return (
            f"; its change is {NOT_IN_LOG} read back after quiescence (other changes of "
            "the key are): the broker lost it or retention or compaction removed it",
            [],
        )
    return "", []
