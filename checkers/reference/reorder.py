"""Reorder: did versions go backwards, did polls go back or skip, do offsets disagree?

The plain-Python specification of the `reorder` kinds of docs/checkers.md:
`reorder-delivery` (per consumer instance and key), `stale-overwrite` (per store and
key), `nonmonotonic-poll` and `poll-skip` (per consumer instance, channel and partition)
and `inconsistent-offset` (per channel, partition and offset).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence

from checkers.anomaly import Anomaly, evidence_json
from checkers.reference.common import is_consumer_delivery, is_effect, order_key
from harness.history.schema import Event, EventType, MsgAction

CHECKER = "reorder"

Coords = tuple[str, int | None, int]


def check(events: Sequence[Event]) -> list[Anomaly]:
    """Every reorder anomaly of the history."""
    return key_checks(events) + partition_checks(events)


def key_checks(events: Sequence[Event]) -> list[Anomaly]:
    """reorder-delivery and stale-overwrite: per key, so of any set of whole keys."""
    ordered = sorted(events, key=order_key)
    delivers = [e for e in ordered if is_consumer_delivery(e)]
    effects = [e for e in ordered if is_effect(e)]
    return [
        *_regressions(
            delivers, "reorder-delivery", lambda e: (e.consumer, e.process, e.key), "delivered"
        ),
        *_regressions(effects, "stale-overwrite", lambda e: (e.store, e.key), "applied"),
    ]


def partition_checks(events: Sequence[Event]) -> list[Anomaly]:
    """nonmonotonic-poll, poll-skip and inconsistent-offset: per channel partition, so
    of any set of whole channel partitions."""
    ordered = sorted(events, key=order_key)
    delivers = [e for e in ordered if is_consumer_delivery(e)]
    return [*_polls(ordered, delivers), *_inconsistent_offsets(ordered)]


def _is(e: Event, action: MsgAction) -> bool:
    return e.type == EventType.MSG and e.action == action


def _regressions(
    ordered: Iterable[Event], kind: str, group: Callable[[Event], Hashable], verb: str
) -> list[Anomaly]:
    """Events whose version is below the highest version earlier in their group."""
    highest: dict[Hashable, Event] = {}
    out: list[Anomaly] = []
    for e in ordered:
        if e.key is None or e.version is None:
            continue
        g = group(e)
        top = highest.get(g)
        if top is not None and e.version < top.version:
            out.append(
                Anomaly(
                    checker=CHECKER,
                    kind=kind,
                    store=e.store if kind == "stale-overwrite" else None,
                    key=e.key,
                    consumer=e.consumer,
                    time=e.time,
                    detail=f"{e.key!r} version {e.version} {verb} after version {top.version}",
                    evidence=evidence_json([top, e]),
                )
            )
        if top is None or e.version > top.version:
            highest[g] = e
    return out


def _polls(ordered: Sequence[Event], delivers: Iterable[Event]) -> list[Anomaly]:
    """nonmonotonic-poll and poll-skip, per (consumer, process, channel, partition)."""
    produced: dict[tuple[str, int | None], list[int]] = defaultdict(list)
    for e in ordered:
        if _is(e, MsgAction.PRODUCE) and e.channel is not None and e.offset is not None:
            produced[(e.channel, e.partition)].append(e.offset)
    for offsets in produced.values():
        offsets.sort()
    previous: dict[tuple, Event] = {}
    out: list[Anomaly] = []
    for e in delivers:
        if e.channel is None or e.offset is None:
            continue
        g = (e.consumer, e.process, e.channel, e.partition)
        prev = previous.get(g)
        previous[g] = e
        if prev is None:
            continue
        where = f"{e.channel}[{e.partition}]"
        if e.offset <= prev.offset:
            kind = "nonmonotonic-poll"
            detail = f"{e.consumer} read {where} offset {e.offset} after {prev.offset}"
        else:
            offsets = produced.get((e.channel, e.partition), [])
            i = bisect_right(offsets, prev.offset)
            if i == len(offsets) or offsets[i] >= e.offset:
                continue
            kind = "poll-skip"
            detail = (
                f"{e.consumer} read {where} offset {e.offset} after {prev.offset}, "
                f"skipping produced offset {offsets[i]}"
            )
        out.append(
            Anomaly(
                checker=CHECKER,
                kind=kind,
                store=None,
                key=e.key,
                consumer=e.consumer,
                time=e.time,
                detail=detail,
                evidence=evidence_json([prev, e]),
            )
        )
    return out


def _inconsistent_offsets(ordered: Iterable[Event]) -> list[Anomaly]:
    """Coordinates that produce and deliver events give two different msg_id."""
    at: dict[Coords, list[Event]] = defaultdict(list)
    for e in ordered:
        if (
            (_is(e, MsgAction.PRODUCE) or _is(e, MsgAction.DELIVER))
            and e.channel is not None
            and e.offset is not None
            and e.msg_id is not None
        ):
            at[(e.channel, e.partition, e.offset)].append(e)
    out: list[Anomaly] = []
    for (channel, partition, offset), group in at.items():
        first = group[0].msg_id
        other = next((e for e in group if e.msg_id != first), None)
        if other is None:
            continue
        ids = sorted({e.msg_id for e in group if e.msg_id is not None})
        out.append(
            Anomaly(
                checker=CHECKER,
                kind="inconsistent-offset",
                store=None,
                key=None,
                consumer=None,
                time=other.time,
                detail=f"{channel}[{partition}] offset {offset} holds {', '.join(ids)}",
                evidence=evidence_json(group),
            )
        )
    return out
