"""Reorder: did versions go backwards, did polls or sends go back or skip, do offsets
disagree, and how far behind the log's end did consumers read?

The plain-Python specification of the `reorder` kinds of docs/checkers.md:
`reorder-delivery` (per consumer instance and key), `stale-overwrite` (per store and
key), `nonmonotonic-poll` and `poll-skip` (per consumer instance, channel and partition),
`nonmonotonic-send` (per producer instance, channel and partition) and
`inconsistent-offset` (per channel, partition and offset); and of the realtime lag
(Jepsen's `:worst-realtime-lag`), a figure, per channel partition.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from driftlab.checkers.anomaly import Anomaly, evidence_json
from driftlab.checkers.kinds import (
    INCONSISTENT_OFFSET,
    NONMONOTONIC_POLL,
    NONMONOTONIC_SEND,
    POLL_SKIP,
    REORDER_DELIVERY,
    STALE_OVERWRITE,
)
from driftlab.checkers.reference.common import (
    ViewStates,
    found_at,
    in_scope,
    is_arrival,
    is_consumer_delivery,
    least_at_or_above,
    order_key,
    view_of,
    views_of,
)
from driftlab.harness.history.schema import Event, EventType, MsgAction

CHECKER = "reorder"

Coords = tuple[str, int | None, int]


def check(events: Sequence[Event]) -> list[Anomaly]:
    """Every reorder anomaly of the history."""
    return key_checks(events) + partition_checks(events)


def key_checks(events: Sequence[Event], views: frozenset[str] | None = None) -> list[Anomaly]:
    """reorder-delivery and stale-overwrite: per key, so of any set of whole keys. A
    store's versions are those of its effects and of driftlab's observations of it;
    of a view store (`views`, the header's by default), an arrival without a version
    shows one of the versions whose state has its value (view_overwrites)."""
    if views is None:
        views = views_of(events)
    ordered = sorted(events, key=order_key)
    delivers = [e for e in ordered if is_consumer_delivery(e)]
    effects = [e for e in ordered if is_arrival(e) and in_scope(e.store, e.key, views)]
    plain = [e for e in effects if view_of(e.key, views) is None]
    return [
        *_regressions(
            delivers, REORDER_DELIVERY, lambda e: (e.consumer, e.process, e.key), "delivered"
        ),
        *_regressions(plain, STALE_OVERWRITE, lambda e: (e.store, e.key), "applied"),
        *view_overwrites(ordered, [e for e in effects if view_of(e.key, views) is not None], views),
    ]


def view_overwrites(
    ordered: Sequence[Event], arrivals: Sequence[Event], views: frozenset[str]
) -> list[Anomaly]:
    """stale-overwrite of view keys, exact where values repeat across versions: per
    (store, key) in time order, each arrival shows the least version of its candidates
    (ViewStates.versions) at or above the one shown before, which is the assignment
    that leaves every later arrival the most room; an arrival none of whose candidates
    is that high can only show an older state. With one candidate each, this is the
    rule of the other keys."""
    states = ViewStates(ordered, views)
    shown: dict[tuple[str | None, str], tuple[int, Event]] = {}
    out: list[Anomaly] = []
    for e in arrivals:
        candidates = states.versions(e)
        if e.key is None or not candidates:
            continue
        g = (e.store, e.key)
        before = shown.get(g)
        at = least_at_or_above(candidates, None if before is None else before[0])
        if at is not None:
            shown[g] = (at, e)
            continue
        top, by = before
        held = ", ".join(str(v) for v in candidates)
        detail = f"{e.key!r} state of version {held} observed after version {top}"
        out.append(
            found_at(
                CHECKER, STALE_OVERWRITE, e, detail, [by, e], store=e.store, consumer=e.consumer
            )
        )
    return out


def partition_checks(events: Sequence[Event]) -> list[Anomaly]:
    """nonmonotonic-poll, poll-skip, nonmonotonic-send and inconsistent-offset: per
    channel partition, so of any set of whole channel partitions."""
    ordered = sorted(events, key=order_key)
    delivers = [e for e in ordered if is_consumer_delivery(e)]
    return [
        *polls(_known_offsets(ordered), delivers),
        *sends(ordered),
        *inconsistent_offsets(ordered),
    ]


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
            detail = f"{e.key!r} version {e.version} {verb} after version {top.version}"
            store = e.store if kind == STALE_OVERWRITE else None
            out.append(
                found_at(CHECKER, kind, e, detail, [top, e], store=store, consumer=e.consumer)
            )
        if top is None or e.version > top.version:
            highest[g] = e
    return out


def _observes_offset(e: Event) -> bool:
    """A `produce` or a `deliver` (any consumer's, the log audit's too) with
    coordinates: what proves an offset of a channel partition was written."""
    return (
        (_is(e, MsgAction.PRODUCE) or _is(e, MsgAction.DELIVER))
        and e.channel is not None
        and e.offset is not None
    )


def _known_offsets(ordered: Iterable[Event]) -> dict[tuple[str, int | None], list[int]]:
    """(channel, partition) -> the offsets any observation shows written, sorted: a
    poll that read offset 3 proves it as well as the send acknowledged there (Jepsen
    infers its version orders from sends and polls alike)."""
    known: dict[tuple[str, int | None], set[int]] = defaultdict(set)
    for e in ordered:
        if _observes_offset(e):
            known[(e.channel, e.partition)].add(e.offset)
    return {where: sorted(offsets) for where, offsets in known.items()}


def polls(
    known: dict[tuple[str, int | None], list[int]], delivers: Iterable[Event]
) -> list[Anomaly]:
    """nonmonotonic-poll and poll-skip, per (consumer, process, channel, partition), of
    consumer deliveries in order; `known` holds each channel partition's offsets, sorted
    (only those above a delivery's predecessor count)."""
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
            kind = NONMONOTONIC_POLL
            detail = f"{e.consumer} read {where} offset {e.offset} after {prev.offset}"
        else:
            offsets = known.get((e.channel, e.partition), [])
            i = bisect_right(offsets, prev.offset)
            if i == len(offsets) or offsets[i] >= e.offset:
                continue
            kind = POLL_SKIP
            detail = (
                f"{e.consumer} read {where} offset {e.offset} after {prev.offset}, "
                f"skipping offset {offsets[i]}, which the log held"
            )
        out.append(found_at(CHECKER, kind, e, detail, [prev, e], consumer=e.consumer))
    return out


def sends(ordered: Iterable[Event]) -> list[Anomaly]:
    """nonmonotonic-send: per (process, channel, partition), in time order, a `produce`
    whose offset is below the same producer's previous one (Jepsen's
    `:nonmonotonic-send`). A produce without a process names no producer: not judged;
    one at the same offset again is no step back (two messages there are an
    inconsistent-offset, one message twice is no anomaly)."""
    previous: dict[tuple[str, str, int | None], Event] = {}
    out: list[Anomaly] = []
    for e in ordered:
        if not (_is(e, MsgAction.PRODUCE) and e.channel is not None and e.offset is not None):
            continue
        if e.process is None:
            continue
        g = (e.process, e.channel, e.partition)
        prev = previous.get(g)
        previous[g] = e
        if prev is None or e.offset >= prev.offset:
            continue
        detail = (
            f"{e.process} sent to {e.channel}[{e.partition}] at offset {e.offset} "
            f"after offset {prev.offset}"
        )
        out.append(found_at(CHECKER, NONMONOTONIC_SEND, e, detail, [prev, e]))
    return out


def inconsistent_offsets(ordered: Iterable[Event]) -> list[Anomaly]:
    """Coordinates that produce and deliver events give two different msg_id; the
    events in order."""
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
                kind=INCONSISTENT_OFFSET,
                store=None,
                key=None,
                consumer=None,
                time=other.time,
                detail=f"{channel}[{partition}] offset {offset} holds {', '.join(ids)}",
                evidence=evidence_json(group),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class RealtimeLag:
    """A poll's realtime lag: how long before the poll the log was known to hold an
    offset beyond the highest one its consumer instance had read (Jepsen's realtime
    lag, a lower bound on how far behind the log's end the consumer read)."""

    channel: str
    partition: int | None
    consumer: str
    process: str | None
    time: int
    """The poll's time: its deliveries' (one instance, one partition, one time)."""
    lag_ns: int

    def rank(self) -> tuple[int, int, str, bool, int, str, bool, str]:
        """The worst first: the largest lag, then the earliest, then by name."""
        return (
            -self.lag_ns,
            self.time,
            self.channel,
            self.partition is not None,
            self.partition or 0,
            self.consumer,
            self.process is not None,
            self.process or "",
        )

    def to_dict(self) -> dict[str, Any]:
        """The sample as series.json and analysis.json give it."""
        return {
            "channel": self.channel,
            "partition": self.partition,
            "consumer": self.consumer,
            "process": self.process,
            "time_ns": self.time,
            "lag_ns": self.lag_ns,
        }

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> RealtimeLag:
        """The sample to_dict gave."""
        return cls(
            row["channel"],
            row["partition"],
            row["consumer"],
            row["process"],
            row["time_ns"],
            row["lag_ns"],
        )


def realtime_lags(events: Sequence[Event]) -> list[RealtimeLag]:
    """Every poll's realtime lag.

    A poll is the deliveries of one channel partition to one consumer instance
    (consumer, process; not the log audit) at one time. After it the instance has read
    up to h, the highest offset it was delivered there so far; the log was known to
    hold an offset above h from the earliest observation (a produce or a deliver, the
    log audit's included) of any offset above h. The lag is the poll's time minus that
    earliest time, or 0 when no such offset was ever observed or it was observed after
    the poll.
    """
    ordered = sorted(events, key=order_key)
    first_seen: dict[tuple[str, int | None], dict[int, int]] = defaultdict(dict)
    polls: dict[tuple[str, int | None, str, str | None], list[Event]] = defaultdict(list)
    for e in ordered:
        if not _observes_offset(e):
            continue
        seen = first_seen[(e.channel, e.partition)]
        seen.setdefault(e.offset, e.time)
        if is_consumer_delivery(e):
            polls[(e.channel, e.partition, e.consumer, e.process)].append(e)
    known: dict[tuple[str, int | None], tuple[list[int], list[int]]] = {}
    for where, seen in first_seen.items():
        offsets = sorted(seen)
        # since[i]: the earliest time any offset >= offsets[i] was observed
        since = [seen[o] for o in offsets]
        for i in range(len(since) - 2, -1, -1):
            since[i] = min(since[i], since[i + 1])
        known[where] = (offsets, since)
    out: list[RealtimeLag] = []
    for (channel, partition, consumer, process), delivered in polls.items():
        offsets, since = known[(channel, partition)]
        top: int | None = None
        for i, e in enumerate(delivered):
            top = e.offset if top is None else max(top, e.offset)
            if i + 1 < len(delivered) and delivered[i + 1].time == e.time:
                continue  # the same poll goes on
            j = bisect_left(offsets, top + 1)
            lag = max(0, e.time - since[j]) if j < len(offsets) else 0
            out.append(RealtimeLag(channel, partition, consumer, process, e.time, lag))
    return out


def worst_realtime_lags(events: Sequence[Event]) -> list[RealtimeLag]:
    """Per channel partition, its worst poll (RealtimeLag.rank): what the keyed pass
    gives of each PARTITION group."""
    worst: dict[tuple[str, int | None], RealtimeLag] = {}
    for lag in realtime_lags(events):
        where = (lag.channel, lag.partition)
        if where not in worst or lag.rank() < worst[where].rank():
            worst[where] = lag
    return list(worst.values())


def worst_realtime_lag(lags: Iterable[RealtimeLag]) -> RealtimeLag | None:
    """The worst of `lags` (Jepsen's `:worst-realtime-lag`), None without a poll."""
    return min(lags, key=RealtimeLag.rank, default=None)
