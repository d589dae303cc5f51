"""The lost checker: hand-made histories, and reference/Spark agreement."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from keyed_support import spark_check, spark_notes
from strategies_messages import combined_histories

from checkers.anomaly import KINDS
from checkers.reference import lost as reference
from harness.history.reader import read_parquet
from harness.history.schema import COLUMNS, Event
from harness.testing.synthetic import generate


def msg(action: str, t: int, msg_id: str, **kw: object) -> Event:
    return Event(type="msg", time=t, action=action, msg_id=msg_id, **kw)


def produce(t: int, msg_id: str, channel: str = "orders") -> Event:
    return msg("produce", t, msg_id, channel=channel, key=f"key-{msg_id}")


def deliver(t: int, msg_id: str, consumer: str, channel: str = "orders") -> Event:
    return msg("deliver", t, msg_id, channel=channel, consumer=consumer, process=f"{consumer}-1")


def done(t: int, consumer: str, channel: str | None = "orders") -> Event:
    return Event(type="mark", time=t, kind="consumer-done", consumer=consumer, channel=channel)


def write(
    t: int, key: str, value: str | None, phase: str = "ok", f: str = "write", **kw: object
) -> Event:
    return Event(type="op", time=t, phase=phase, f=f, store="source", key=key, value=value, **kw)


def effect(
    t: int, store: str, key: str, value: str | None, action: str = "apply", **kw: object
) -> Event:
    return Event(type="msg", time=t, action=action, store=store, key=key, value=value, **kw)


QUIESCED = Event(type="mark", time=99, kind="quiesced")

MESSAGES = [
    produce(1, "m1"),
    produce(2, "m2"),
    produce(3, "m3"),
    produce(5, "m2"),  # a producer retry: one lost message, timed by the first produce
    produce(4, "m4", channel="audit"),  # nobody consumes audit
    deliver(10, "m1", "g"),
    deliver(11, "m3", "g"),
    done(20, "g"),  # g: m2 lost
    deliver(12, "m1", "h"),  # h is not done: m2 and m3 unseen
    deliver(13, "m1", "x"),
    done(21, "x", channel=None),  # x: done on orders, its only channel: m2, m3 lost
    done(22, "y"),  # y never read a thing but is done: m1, m2, m3 lost
]

WRITES = [
    QUIESCED,
    write(1, "a", "a1"),
    write(2, "b", "b1"),
    write(3, "a", None, f="delete", version=3),
    write(8, "a", None, f="delete", version=8),  # a delete is known by its version: lost
    write(4, "c", "c9", phase="info"),  # reached cache: recovered
    write(5, "d", "d9", phase="info"),  # never seen: neither lost nor recovered
    write(6, "e", "e1", phase="fail"),  # never committed
    Event(type="op", time=7, phase="invoke", f="write", store="source", key="a", value="a1"),
    effect(10, "cache", "a", "a1"),
    effect(11, "cache", "b", "b1", action="skip"),  # reached, though not applied
    effect(12, "cache", "a", None, version=3),  # the first delete
    effect(13, "cache", "c", "c9"),
    Event(type="op", time=14, phase="ok", f="write", store="search", key="a", value="a1"),
    effect(15, "counter", "b", "b1", action="skip"),  # counter has no effects: not judged
]


def identities(anomalies) -> Counter:
    return Counter(a.identity() for a in anomalies)


def test_empty_history_loses_nothing() -> None:
    assert reference.check([]) == []
    assert reference.notes([]) == {"unseen-message": 0, "recovered-write": 0}


def test_lost_messages_per_done_consumer() -> None:
    found = reference.check(MESSAGES)
    assert Counter((a.consumer, a.key, a.time) for a in found) == Counter(
        {
            ("g", "key-m2", 2): 1,
            ("x", "key-m2", 2): 1,
            ("x", "key-m3", 3): 1,
            ("y", "key-m1", 1): 1,
            ("y", "key-m2", 2): 1,
            ("y", "key-m3", 3): 1,
        }
    )
    assert {a.kind for a in found} == {"lost-message"}
    assert reference.notes(MESSAGES) == {"unseen-message": 2, "recovered-write": 0}


def test_lost_writes_per_store_with_effects() -> None:
    found = reference.check(WRITES)
    assert identities(found) == Counter(
        {
            ("lost", "lost-write", "search", "b", None, 2): 1,
            ("lost", "lost-write", "search", "a", None, 3): 1,  # the deletes of a
            ("lost", "lost-write", "search", "a", None, 8): 1,
            ("lost", "lost-write", "cache", "a", None, 8): 1,
        }
    )
    assert reference.notes(WRITES) == {"unseen-message": 0, "recovered-write": 1}


def test_no_lost_write_before_quiescence() -> None:
    unfinished = [e for e in WRITES if e is not QUIESCED]
    assert reference.check(unfinished) == []
    assert reference.notes(unfinished)["recovered-write"] == 1


@pytest.mark.spark
def test_spark_finds_the_hand_made_losses(spark) -> None:
    events = MESSAGES + WRITES
    rows = spark_check(spark, events, "lost").collect()
    assert Counter(tuple(r)[:6] for r in rows) == identities(reference.check(events))
    assert len(rows) == 10
    assert spark_notes(spark, events) == {"unseen-message": 2, "recovered-write": 1}
    g = next(r for r in rows if r.consumer == "g")
    assert g.detail == "m2 produced on orders, never delivered to g"
    assert g.evidence.count('"msg_id":"m2"') == 2


def test_finds_what_the_synthetic_generator_planted(tmp_path) -> None:
    """harness.testing.synthetic plants each kind by its own reading of the spec."""
    run = generate(tmp_path / "run", 2000, seed=11, plant={k: 2 for k in KINDS["lost"]})
    rows = read_parquet(run.run_dir / "history.parquet").table.to_pylist()
    events = [Event(**{c: r[c] for c in COLUMNS}) for r in rows]
    found = Counter(a.kind for a in reference.check(events))
    kinds = KINDS["lost"]
    assert {k: found[k] for k in kinds} == {k: run.expected[k] for k in kinds}
    assert reference.notes(events)["recovered-write"] == run.notes["recovered-write"]


@pytest.mark.spark
@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(combined_histories())
def test_reference_and_spark_agree(spark, events: list[Event]) -> None:
    rows = spark_check(spark, events, "lost").collect()
    assert Counter(tuple(r)[:6] for r in rows) == identities(reference.check(events))
    assert spark_notes(spark, events) == reference.notes(events)
