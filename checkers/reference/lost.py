"""Lost: did every message reach each consumer done with its channel, and every write
each derived store?

The plain-Python specification of `lost-message` and `lost-write` of docs/checkers.md,
and of the notes `unseen-message` and `recovered-write`.

A consumer C consumes a channel X when it has a `deliver` on X or a `consumer-done` mark
for X; it is done on X when it has a `consumer-done` mark for X, or one without a
channel (done on every channel it has a `deliver` on).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from checkers.anomaly import Anomaly, evidence_json
from checkers.reference.common import is_effect, is_source_write, order_key
from harness.history.schema import SOURCE_STORE, Event, EventType, Mark, MsgAction, OpPhase

CHECKER = "lost"


def check(events: Sequence[Event]) -> list[Anomaly]:
    """Every lost message (per consumer) and every lost write (per derived store)."""
    return _messages(events).lost + _writes(events).lost


def notes(events: Sequence[Event]) -> dict[str, int]:
    """Counts of the notes: `unseen-message` and `recovered-write`."""
    return {
        "unseen-message": _messages(events).unseen,
        "recovered-write": _writes(events).recovered,
    }


@dataclass
class _Outcome:
    lost: list[Anomaly] = field(default_factory=list)
    unseen: int = 0
    recovered: int = 0


def _is(e: Event, action: MsgAction) -> bool:
    return e.type == EventType.MSG and e.action == action


def _messages(events: Sequence[Event]) -> _Outcome:
    delivered_on: dict[str, set[str]] = defaultdict(set)
    delivered: set[tuple[str, str]] = set()
    marked: dict[str, set[str]] = defaultdict(set)
    done_everywhere: set[str] = set()
    produced: dict[str, list[Event]] = defaultdict(list)
    for e in sorted(events, key=order_key):
        if _is(e, MsgAction.DELIVER) and e.consumer is not None:
            if e.channel is not None:
                delivered_on[e.consumer].add(e.channel)
            if e.msg_id is not None:
                delivered.add((e.consumer, e.msg_id))
        elif _is(e, MsgAction.PRODUCE) and e.channel is not None and e.msg_id is not None:
            produced[e.msg_id].append(e)
        elif e.type == EventType.MARK and e.kind == Mark.CONSUMER_DONE and e.consumer is not None:
            if e.channel is None:
                done_everywhere.add(e.consumer)
            else:
                marked[e.consumer].add(e.channel)
    out = _Outcome()
    for consumer in sorted(delivered_on.keys() | marked.keys()):
        consumes = delivered_on[consumer] | marked[consumer]
        done = marked[consumer] | (delivered_on[consumer] if consumer in done_everywhere else set())
        for msg_id, produces in produced.items():
            if (consumer, msg_id) in delivered:
                continue
            ends = [p for p in produces if p.channel in done]
            if ends:
                first = ends[0]
                out.lost.append(
                    Anomaly(
                        checker=CHECKER,
                        kind="lost-message",
                        store=None,
                        key=first.key,
                        consumer=consumer,
                        time=first.time,
                        detail=f"{msg_id} produced on {first.channel}, never delivered "
                        f"to {consumer}",
                        evidence=evidence_json(ends),
                    )
                )
            elif any(p.channel in consumes for p in produces):
                out.unseen += 1
    return out


def _carried(e: Event) -> tuple[str | None, str | None, int | None]:
    """What identifies the write an event carries: (key, value), and for a delete, which
    has no value, (key, version)."""
    return (e.key, e.value, e.version if e.value is None else None)


def _writes(events: Sequence[Event]) -> _Outcome:
    reached: set[tuple[str, tuple[str | None, str | None, int | None]]] = set()
    effect_stores: set[str] = set()
    for e in events:
        if e.key is None:
            continue
        if is_effect(e):
            effect_stores.add(e.store)
            reached.add((e.store, _carried(e)))
        elif _is(e, MsgAction.SKIP) and e.store is not None and e.store != SOURCE_STORE:
            reached.add((e.store, _carried(e)))
    anywhere = {carried for _, carried in reached}
    quiesced = any(e.type == EventType.MARK and e.kind == Mark.QUIESCED for e in events)
    out = _Outcome()
    for w in sorted(events, key=order_key):
        if not is_source_write(w) or w.key is None:
            continue
        if w.phase == OpPhase.INFO and _carried(w) in anywhere:
            out.recovered += 1
        if w.phase != OpPhase.OK or not quiesced:
            continue
        for store in sorted(effect_stores):
            if (store, _carried(w)) not in reached:
                out.lost.append(
                    Anomaly(
                        checker=CHECKER,
                        kind="lost-write",
                        store=store,
                        key=w.key,
                        consumer=None,
                        time=w.time,
                        detail=f"{w.f} of {w.key!r} = {w.value!r} never reached {store}",
                        evidence=evidence_json([w]),
                    )
                )
    return out
