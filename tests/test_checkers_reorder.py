"""The reorder checker: hand-made histories, and reference/Spark agreement."""

from __future__ import annotations

from collections import Counter

import pytest
from keyed_support import agreed

from driftlab.checkers.reference import reorder as reference
from driftlab.harness.history.schema import LOG_AUDIT, Event


def msg(action: str, t: int, **kw: object) -> Event:
    return Event(type="msg", time=t, action=action, **kw)


def deliver(t: int, key: str, version: int, process: str = "p1", **kw: object) -> Event:
    return msg("deliver", t, key=key, version=version, consumer="g", process=process, **kw)


def apply(t: int, key: str, version: int, store: str = "cache", **kw: object) -> Event:
    return msg("apply", t, key=key, version=version, store=store, consumer="g", **kw)


def poll(t: int, offset: int, process: str = "p1", msg_id: str | None = None) -> Event:
    return msg(
        "deliver",
        t,
        channel="c",
        partition=0,
        offset=offset,
        consumer="g",
        process=process,
        msg_id=msg_id or f"m{offset}",
    )


def produce(t: int, offset: int, msg_id: str | None = None, partition: int = 0) -> Event:
    return msg(
        "produce", t, channel="c", partition=partition, offset=offset, msg_id=msg_id or f"m{offset}"
    )


def kinds(anomalies: list) -> Counter:
    return Counter(a.kind for a in anomalies)


CLEAN = [
    *[produce(i, i) for i in range(4)],
    *[poll(10 + i, i) for i in range(4)],
    deliver(20, "k", 1),
    deliver(21, "k", 2),
    deliver(22, "j", 1),
    deliver(23, "k", 2),  # the same version again is no regression
    apply(24, "k", 1),
    apply(25, "k", 2),
    apply(26, "k", 2),
    msg("skip", 27, key="k", version=1, store="cache"),  # rightly ignored, not applied
    apply(28, "k", 1, store="search"),
]

# Planted: each comment names the one anomaly the event shows.
PLANTED = [
    deliver(1, "k", 3),
    deliver(2, "k", 1),  # reorder-delivery at 2
    deliver(3, "j", 2),
    deliver(4, "k", 2),  # reorder-delivery at 4 (below 3, the highest so far)
    deliver(5, "k", 1, process="p2"),  # restarted instance: judged on its own
    deliver(6, "k", 3, process="p2"),
    apply(7, "k", 5),
    apply(8, "k", 4),  # stale-overwrite at 8
    Event(type="op", time=9, phase="ok", f="write", store="cache", key="k", version=4),
    # stale-overwrite at 9: the application writing the store directly
    Event(type="op", time=10, phase="ok", f="write", store="source", key="k", version=1),
    *[produce(20 + i, i) for i in (0, 1, 2, 3, 5, 6)],  # offset 4 compacted away
    poll(30, 0),
    poll(31, 2),  # poll-skip at 31: offset 1 was produced
    poll(32, 3),
    poll(33, 5),  # the gap holds only the compacted offset 4: no skip
    poll(34, 3),  # nonmonotonic-poll at 34
    poll(35, 3),  # nonmonotonic-poll at 35: not above the previous offset
    poll(36, 2, process="p2"),  # a restarted instance starts where it likes
    poll(37, 3, process="p2"),
    produce(40, 9, msg_id="a", partition=1),
    msg("deliver", 41, channel="c", partition=1, offset=9, msg_id="b", consumer="g"),
    # inconsistent-offset at 41
    msg("deliver", 42, channel="c", partition=1, offset=9, msg_id="a", consumer="g2"),
    produce(43, 9, msg_id="z", partition=2),  # another partition: other coordinates
    msg("deliver", 50, channel="c", partition=3, offset=7, msg_id="q", consumer="g2"),
    msg("deliver", 51, channel="c", partition=3, offset=6, msg_id="p", consumer="g"),
    # poll-skip at 52: offset 7 is known from another consumer's poll only
    msg("deliver", 52, channel="c", partition=3, offset=8, msg_id="r", consumer="g"),
    # no skip: nothing observed offset 9
    msg("deliver", 53, channel="c", partition=3, offset=10, msg_id="s", consumer="g"),
    msg("produce", 60, channel="c", partition=4, offset=5, msg_id="s5", process="pr1"),
    # nonmonotonic-send at 61: below the producer's previous offset
    msg("produce", 61, channel="c", partition=4, offset=3, msg_id="s3", process="pr1"),
    msg("produce", 62, channel="c", partition=4, offset=4, msg_id="s4", process="pr1"),
    msg("produce", 63, channel="c", partition=4, offset=2, msg_id="s2", process="pr2"),
    # the same offset again is no step back
    msg("produce", 64, channel="c", partition=4, offset=4, msg_id="s4", process="pr1"),
    # no producer named: not judged
    msg("produce", 65, channel="c", partition=4, offset=1, msg_id="s1"),
]

EXPECTED = Counter(
    {
        ("reorder-delivery", 2),
        ("reorder-delivery", 4),
        ("stale-overwrite", 8),
        ("stale-overwrite", 9),
        ("poll-skip", 31),
        ("nonmonotonic-poll", 34),
        ("nonmonotonic-poll", 35),
        ("inconsistent-offset", 41),
        ("poll-skip", 52),
        ("nonmonotonic-send", 61),
    }
)


def test_empty_history_has_no_reorder() -> None:
    assert reference.check([]) == []


def test_ordered_history_is_clean() -> None:
    assert reference.check(CLEAN) == []


def test_planted_reorders_are_found_exactly() -> None:
    found = reference.check(PLANTED)
    assert Counter((a.kind, a.time) for a in found) == EXPECTED
    stale = [a for a in found if a.kind == "stale-overwrite"]
    assert {a.store for a in stale} == {"cache"}
    assert {a.consumer for a in stale} == {"g", None}
    offset = next(a for a in found if a.kind == "inconsistent-offset")
    assert (offset.key, offset.consumer, offset.store) == (None, None, None)
    assert offset.detail == "c[1] offset 9 holds a, b"


def test_realtime_lag_of_each_poll() -> None:
    """A poll is an instance's deliveries at one time; its lag runs from the first
    observation of an offset above what the instance had read."""
    events = [
        produce(0, 0),
        produce(1, 1),
        produce(5, 2),
        poll(3, 0),  # offset 1 known since 1: lag 2
        poll(10, 1),
        poll(10, 2),  # one poll with the one before: read to 2, nothing above: 0
        msg("deliver", 20, channel="c", partition=0, offset=3, msg_id="m3", consumer=LOG_AUDIT),
        poll(30, 0, process="p2"),  # offset 1 known since 1: lag 29
        poll(31, 2, process="p2"),  # offset 3 known since the log audit read it at 20: 11
        poll(40, 3, process="p2"),  # read to the end: 0
    ]
    lags = reference.realtime_lags(events)
    assert sorted((lag.time, lag.process, lag.lag_ns) for lag in lags) == [
        (3, "p1", 2),
        (10, "p1", 0),
        (30, "p2", 29),
        (31, "p2", 11),
        (40, "p2", 0),
    ]
    (worst,) = reference.worst_realtime_lags(events)
    assert (worst.channel, worst.partition, worst.consumer, worst.process) == ("c", 0, "g", "p2")
    assert (worst.time, worst.lag_ns) == (30, 29)
    other = reference.RealtimeLag("d", 0, "g", "p1", 25, 29)  # as bad, earlier: worse
    assert reference.worst_realtime_lag([worst, other]) == other
    assert reference.worst_realtime_lag([]) is None


def test_redelivery_in_the_same_instance_is_a_reorder() -> None:
    events = [deliver(1, "k", 1), deliver(2, "k", 2), deliver(3, "k", 1, attempt=2)]
    (found,) = reference.check(events)
    assert (found.kind, found.key, found.consumer, found.time) == ("reorder-delivery", "k", "g", 3)


@pytest.mark.spark
def test_spark_finds_the_planted_reorders(spark) -> None:
    events = CLEAN + [
        Event(**{**e.to_dict(), "time": e.time + 100, "consumer": e.consumer and "h" + e.consumer})
        for e in PLANTED
    ]
    found = agreed(spark, events, "reorder")
    assert Counter((a.kind, a.time - 100) for a in found) == EXPECTED
