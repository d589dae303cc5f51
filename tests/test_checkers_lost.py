"""The lost checker: hand-made histories, and reference/Spark agreement."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from keyed_support import agreed, spark_check, spark_notes
from reference_counts import run_events
from strategies_states import identities

from driftlab.checkers.reference import duplicates as dup
from driftlab.checkers.reference import lost as reference
from driftlab.checkers.reference import reorder
from driftlab.harness.history.schema import LOG_AUDIT, Event
from driftlab.harness.lab.testing.synthetic import generate


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
    assert len(agreed(spark, events, "lost")) == 10
    rows = spark_check(spark, events, "lost").collect()
    assert spark_notes(spark, events) == {"unseen-message": 2, "recovered-write": 1}
    g = next(r for r in rows if r.consumer == "g")
    assert g.detail == "m2 produced on orders, never delivered to g"
    assert g.evidence.count('"msg_id":"m2"') == 2


def test_notes_the_recovered_writes_of_a_synthetic_run(tmp_path) -> None:
    """An `info` write that committed anyway is noted as recovered (what the reference
    checkers find of the synthetic generator's plants is tests/test_synthetic.py's)."""
    run = generate(tmp_path / "run", 2000, seed=11, plant={})
    notes = reference.notes(run_events(run.run_dir))
    assert notes["recovered-write"] == run.notes["recovered-write"] > 0


# --- where a lost message went: the log audit ------------------------------------------


def audited(t: int, msg_id: str, offset: int, channel: str = "orders") -> Event:
    """The log audit read msg_id back from the log after quiescence."""
    return msg(
        "deliver",
        t,
        msg_id,
        channel=channel,
        partition=0,
        offset=offset,
        consumer=LOG_AUDIT,
        process=LOG_AUDIT,
        key=f"key-{msg_id}",
    )


def test_a_lost_message_says_whether_the_log_still_holds_it() -> None:
    history = [
        produce(1, "m1"),
        produce(2, "m2"),
        produce(3, "m3"),
        produce(4, "m4", channel="other"),
        deliver(10, "m3", "g"),
        deliver(11, "m4", "g", channel="other"),
        done(20, "g"),
        done(20, "g", channel="other"),
        audited(30, "m1", offset=0),  # skipped by g, still in the log
        audited(31, "m1", offset=7),  # and there twice: the audit is not a consumer
        audited(32, "m3", offset=2),
        done(40, LOG_AUDIT),  # orders read back whole; m2 is gone from it
    ]
    lost = {a.key: a for a in reference.check(history)}
    assert set(lost) == {"key-m1", "key-m2"}  # the audit loses nothing itself
    m1, m2 = lost["key-m1"], lost["key-m2"]
    assert m1.consumer == "g" and m1.detail == (
        f"m1 produced on orders, never delivered to g; still {reference.IN_LOG} at "
        "orders[0]@0, orders[0]@7: the consumer skipped it"
    )
    assert [e.get("consumer") for e in json.loads(m1.evidence)] == [None, LOG_AUDIT, LOG_AUDIT]
    assert f"; {reference.NOT_IN_LOG} read back after quiescence" in m2.detail
    assert len(json.loads(m2.evidence)) == 1
    # m1 twice in the log is Jepsen's :duplicate; the audit's reads deliver nothing twice.
    assert [a.kind for a in dup.check(history)] == ["duplicate-offset"]
    assert reorder.check(history) == []
    # Without the audit's mark the log's contents are unknown: nothing is said.
    unknown = reference.check([*history[:-1], done(41, LOG_AUDIT, channel="other")])
    assert [a.detail for a in unknown if a.key == "key-m2"] == [
        "m2 produced on orders, never delivered to g"
    ]


def test_an_unfinished_log_audit_leaves_its_misses_unseen() -> None:
    history = [produce(1, "m1"), produce(2, "m2"), audited(30, "m1", offset=0)]
    assert reference.check(history) == []
    assert reference.notes(history)["unseen-message"] == 1


def test_a_lost_write_whose_change_is_still_in_the_log() -> None:
    change = Event(
        type="msg",
        time=30,
        action="deliver",
        channel="dbz",
        partition=0,
        offset=4,
        msg_id="lsn:a",
        key="a",
        value="a2",
        version=2,
        consumer=LOG_AUDIT,
        process=LOG_AUDIT,
    )
    history = [
        QUIESCED,
        write(1, "a", "a1", version=1),
        write(2, "a", "a2", version=2),
        write(3, "a", "a3", version=3),
        write(4, "b", "b1", version=1),
        effect(10, "cache", "a", "a1"),
        effect(11, "cache", "c", "c1"),
        change,  # a2 is in the log; a3 is not, though the audit read the key
    ]
    lost = {a.detail.split(" never")[0]: a for a in reference.check(history)}
    assert set(lost) == {"write of 'a' = 'a2'", "write of 'a' = 'a3'", "write of 'b' = 'b1'"}
    assert lost["write of 'a' = 'a2'"].detail.endswith(
        f"; its change is still {reference.IN_LOG} at dbz[0]@4: the consumer skipped it"
    )
    assert json.loads(lost["write of 'a' = 'a2'"].evidence)[1]["offset"] == 4
    assert f"its change is {reference.NOT_IN_LOG}" in lost["write of 'a' = 'a3'"].detail
    assert lost["write of 'b' = 'b1'"].detail == "write of 'b' = 'b1' never reached cache"
