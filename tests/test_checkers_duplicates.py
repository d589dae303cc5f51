"""The duplicates checker: hand-made histories, and reference/Spark agreement."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from keyed_support import agreed, spark_check

from driftlab.checkers.reference import duplicates as reference
from driftlab.harness.history.schema import Event


def deliver(t: int, msg_id: str, consumer: str = "g", **kw: object) -> Event:
    return Event(type="msg", time=t, action="deliver", msg_id=msg_id, consumer=consumer, **kw)


def apply(t: int, msg_id: str, store: str = "cache", **kw: object) -> Event:
    return Event(type="msg", time=t, action="apply", msg_id=msg_id, store=store, **kw)


def kinds(anomalies: list) -> Counter:
    return Counter(a.kind for a in anomalies)


def test_empty_history_has_no_duplicates() -> None:
    assert reference.check([]) == []


def test_single_deliveries_and_applies_are_clean() -> None:
    events = [
        deliver(1, "m1"),
        deliver(2, "m2"),
        deliver(3, "m1", consumer="other"),  # another consumer: its own delivery
        apply(4, "m1"),
        apply(5, "m1", store="search"),
    ]
    assert reference.check(events) == []


def test_redelivery_after_restart_is_a_duplicate_delivery() -> None:
    events = [
        deliver(1, "m1", key="k", process="p1"),
        apply(2, "m1", key="k", consumer="g"),
        deliver(5, "m1", key="k", process="p2", attempt=2),
        deliver(7, "m1", key="k", process="p2", attempt=3),
        apply(8, "m1", key="k", consumer="g"),
        apply(9, "m2"),
    ]
    found = reference.check(events)
    assert kinds(found) == Counter({"duplicate-delivery": 1, "duplicate-apply": 1})
    by_kind = {a.kind: a for a in found}
    # The second event makes the duplicate: its time, key and consumer identify it.
    assert by_kind["duplicate-delivery"].identity() == (
        "duplicates",
        "duplicate-delivery",
        None,
        "k",
        "g",
        5,
    )
    assert by_kind["duplicate-apply"].identity() == (
        "duplicates",
        "duplicate-apply",
        "cache",
        "k",
        "g",
        8,
    )
    assert '"attempt":3' in by_kind["duplicate-delivery"].evidence


def placed(t: int, action: str, msg_id: str, offset: int, **kw: object) -> Event:
    return Event(type="msg", time=t, action=action, msg_id=msg_id, channel="c", offset=offset, **kw)


def test_one_message_at_two_offsets_is_a_duplicate_offset() -> None:
    """A retry without idempotence: m1 acknowledged at 1, then read at 3 by a consumer
    and at 3 again by the log audit; m2 at 2 twice is no duplicate, nor is m1 at 1 on
    another partition."""
    events = [
        placed(1, "produce", "m1", 1, partition=0, key="k"),
        placed(2, "produce", "m2", 2, partition=0),
        placed(3, "deliver", "m2", 2, partition=0, consumer="g"),
        placed(4, "deliver", "m1", 3, partition=0, consumer="g", key="k2"),
        placed(5, "deliver", "m1", 3, partition=0, consumer="log-audit"),
        placed(6, "produce", "m1", 1, partition=1),
    ]
    (found,) = reference.check(events)
    # The first event at another offset than the first one's identifies it.
    assert found.identity() == ("duplicates", "duplicate-offset", None, "k2", None, 4)
    assert found.detail == "m1 is at offsets 1, 3 of c[0]"
    assert [e["offset"] for e in json.loads(found.evidence)] == [1, 3]


def test_equal_times_follow_recorded_order() -> None:
    events = [
        deliver(3, "m1", key="late", writer="w", seq=2),
        deliver(3, "m1", key="early", writer="w", seq=1),
    ]
    (found,) = reference.check(events)
    assert found.key == "late"


@pytest.mark.spark
def test_spark_finds_the_hand_made_duplicates(spark) -> None:
    events = [
        deliver(1, "m1", key="k"),
        deliver(5, "m1", key="k"),
        deliver(6, "m2", key="k"),
        apply(2, "m1", key="k"),
        apply(6, "m1", key="k", consumer="g"),
        apply(9, "m1", key="k", consumer="g"),
    ]
    assert len(agreed(spark, events, "duplicates")) == 2
    rows = spark_check(spark, events, "duplicates").collect()
    apply_row = next(r for r in rows if r.kind == "duplicate-apply")
    assert apply_row.time == 6 and apply_row.detail == "m1 applied 3 times to cache"
    assert apply_row.evidence.count('"action":"apply"') == 3
