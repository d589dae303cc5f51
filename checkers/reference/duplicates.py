"""Duplicates: was a message delivered, or applied, more than once?

The plain-Python specification of `duplicate-delivery` (per consumer and msg_id) and
`duplicate-apply` (per store and msg_id) of docs/checkers.md. A row's time, key and
consumer are those of the second event: the one that makes it a duplicate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from checkers.anomaly import Anomaly, evidence_json
from checkers.reference.common import is_consumer_delivery, order_key
from harness.history.schema import Event, EventType, MsgAction

CHECKER = "duplicates"


def check(events: Sequence[Event]) -> list[Anomaly]:
    """Every (consumer, msg_id) delivered and every (store, msg_id) applied twice or more."""
    deliveries: dict[tuple[str, str], list[Event]] = defaultdict(list)
    applies: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in events:
        if e.type != EventType.MSG or e.msg_id is None:
            continue
        if is_consumer_delivery(e) and e.consumer is not None:
            deliveries[(e.consumer, e.msg_id)].append(e)
        elif e.action == MsgAction.APPLY and e.store is not None:
            applies[(e.store, e.msg_id)].append(e)
    out: list[Anomaly] = []
    for (consumer, msg_id), group in deliveries.items():
        if len(group) > 1:
            group.sort(key=order_key)
            second = group[1]
            out.append(
                Anomaly(
                    checker=CHECKER,
                    kind="duplicate-delivery",
                    store=None,
                    key=second.key,
                    consumer=consumer,
                    time=second.time,
                    detail=f"{msg_id} delivered {len(group)} times to {consumer}",
                    evidence=evidence_json(group),
                )
            )
    for (store, msg_id), group in applies.items():
        if len(group) > 1:
            group.sort(key=order_key)
            second = group[1]
            out.append(
                Anomaly(
                    checker=CHECKER,
                    kind="duplicate-apply",
                    store=store,
                    key=second.key,
                    consumer=second.consumer,
                    time=second.time,
                    detail=f"{msg_id} applied {len(group)} times to {store}",
                    evidence=evidence_json(group),
                )
            )
    return out
