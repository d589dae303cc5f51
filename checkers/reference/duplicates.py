"""Duplicates: was a message delivered, or applied, more than once, or written twice?

The plain-Python specification of `duplicate-delivery` (per consumer and msg_id),
`duplicate-apply` (per store and msg_id) and `duplicate-offset` (per channel partition
and msg_id) of docs/checkers.md. A row's time, key and consumer are those of the event
that makes it a duplicate: the second delivery or apply, the first event at another
offset.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

from driftlab.checkers.anomaly import Anomaly
from driftlab.checkers.kinds import DUPLICATE_APPLY, DUPLICATE_DELIVERY, DUPLICATE_OFFSET
from driftlab.checkers.reference.common import found_at, is_consumer_delivery, order_key
from driftlab.harness.history.schema import Event, EventType, MsgAction

CHECKER = "duplicates"


def check(events: Sequence[Event]) -> list[Anomaly]:
    """Every (consumer, msg_id) delivered and every (store, msg_id) applied twice or more,
    and every msg_id at two offsets of a channel partition."""
    deliveries: dict[tuple[str, str], list[Event]] = defaultdict(list)
    applies: dict[tuple[str, str], list[Event]] = defaultdict(list)
    placed: dict[tuple[str, str, int | None], list[Event]] = defaultdict(list)
    for e in events:
        if e.type != EventType.MSG or e.msg_id is None:
            continue
        if is_consumer_delivery(e) and e.consumer is not None:
            deliveries[(e.consumer, e.msg_id)].append(e)
        elif e.action == MsgAction.APPLY and e.store is not None:
            applies[(e.store, e.msg_id)].append(e)
        # Every observation of the log counts, the log audit's included: its reads are
        # the log's own coordinates.
        if (
            e.action in (MsgAction.PRODUCE, MsgAction.DELIVER)
            and e.channel is not None
            and e.offset is not None
        ):
            placed[(e.msg_id, e.channel, e.partition)].append(e)
    out: list[Anomaly] = _offsets(placed)
    for (consumer, msg_id), group in _repeated(deliveries):
        detail = f"{msg_id} delivered {len(group)} times to {consumer}"
        out.append(
            found_at(CHECKER, DUPLICATE_DELIVERY, group[1], detail, group, consumer=consumer)
        )
    for (store, msg_id), group in _repeated(applies):
        second = group[1]
        detail = f"{msg_id} applied {len(group)} times to {store}"
        out.append(
            found_at(
                CHECKER,
                DUPLICATE_APPLY,
                second,
                detail,
                group,
                store=store,
                consumer=second.consumer,
            )
        )
    return out


def _offsets(placed: dict[tuple[str, str, int | None], list[Event]]) -> list[Anomaly]:
    """duplicate-offset: one message at two or more offsets of a channel partition, as a
    producer's retry without idempotence writes it (Jepsen's `:duplicate`)."""
    out: list[Anomaly] = []
    for (msg_id, channel, partition), group in placed.items():
        group.sort(key=order_key)
        first = group[0].offset
        other = next((e for e in group if e.offset != first), None)
        if other is None:
            continue
        at: dict[int, Event] = {}
        for e in group:
            at.setdefault(e.offset, e)
        offsets = ", ".join(str(o) for o in sorted(at))
        detail = f"{msg_id} is at offsets {offsets} of {channel}[{partition}]"
        out.append(found_at(CHECKER, DUPLICATE_OFFSET, other, detail, (at[o] for o in sorted(at))))
    return out


def _repeated(
    groups: dict[tuple[str, str], list[Event]],
) -> Iterator[tuple[tuple[str, str], list[Event]]]:
    """The groups of two events or more, each sorted in time order (its second event is
    the duplicate)."""
    for where, group in groups.items():
        if len(group) > 1:
            group.sort(key=order_key)
            yield where, group
