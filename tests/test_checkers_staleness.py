"""Staleness: read-your-writes violations and lag, in the reference and in Spark."""

from __future__ import annotations

import pytest
from keyed_support import agreed, spark_lag
from strategies_states import apply, read, write

from driftlab.checkers.reference import staleness as ref
from driftlab.harness.history.schema import Event

MS = 1_000_000

READS = [
    write(10, "k", "v1", 1, process="p1"),
    apply(30, "cache", "k", "v1", 1),
    *read(12, 13, "p1", "cache", "k", None, "r1"),  # own write not there yet: violation
    *read(40, 41, "p1", "cache", "k", "v1", "r2"),  # there now
    *read(12, 13, "p2", "cache", "k", None, "r3"),  # not p2's write
    write(50, "k", "v2", 3, process="p1"),
    *read(45, 60, "p1", "cache", "k", "v1", "r4"),  # invoked before v2 completed
    *read(51, 52, "p1", "cache", "k", "v1", "r5"),  # older committed value: violation
    *read(51, 52, "p1", "source", "k", "v1", "r6"),  # the source itself judged too
    *read(53, 54, "p1", "cache", "k", "ghost", "r7"),  # never written: no version
    write(55, "k", "v3", phase="info", process="p2"),
    *read(56, 57, "p1", "cache", "k", "v3", "r8"),  # uncertain write: no version
    write(58, "d", "d1", 1, process="p1"),
    write(59, "d", None, 2, f="delete", process="p1"),
    *read(60, 61, "p1", "cache", "d", None, "r9"),  # own delete seen
    *read(60, 61, "p1", "cache", "d", "d1", "r10"),  # own delete not seen: violation
    write(62, "e", "e1", 1, process="p1"),
    write(63, "e", None, 4, f="delete", process="p2"),
    *read(64, 65, "p1", "cache", "e", None, "r11"),  # someone else's newer delete
    write(66, "i", "i1", 1, process="p1"),
    write(67, "i", None, f="delete", phase="info", process="p2"),
    *read(68, 69, "p1", "cache", "i", None, "r12"),  # maybe an uncertain delete
    *read(70, 71, "p1", "cache", "k", None, "r13")[1:],  # no invocation recorded
]

LAGS = [
    write(1 * MS, "a", "a1", 1),
    write(2 * MS, "a", "a2", 2),
    write(3 * MS, "b", None, 5, f="delete"),
    write(4 * MS, "c", "c1", 1),
    apply(3 * MS, "cache", "a", "a1", 1),  # 2 ms
    apply(9 * MS, "cache", "a", "a1", 1),  # a redelivery: not the first effect
    apply(7 * MS, "cache", "a", "a2", 2),  # 5 ms
    apply(4 * MS, "cache", "b", None, 5),  # a delete, found by version: 1 ms
    apply(3 * MS, "cache", "c", "c1", 1),  # seen before the ok: 0 ms
    write(12 * MS, "a", "a1", store="search", process="app"),  # 11 ms
    apply(20 * MS, "search", "a", "zzz", 1),  # carries no source write
]


def agree_on_lag(spark, events: list[Event]) -> dict:
    """The reference lag, after checking Spark's is the same: counts, nearest-rank
    percentiles (observed values) and max, exactly."""
    expected = ref.lag(events)
    got, _ = spark_lag(spark, events)
    assert got == expected
    return expected


@pytest.mark.spark
def test_an_empty_history_has_no_lag(spark) -> None:
    assert agree_on_lag(spark, []) == {}


@pytest.mark.spark
def test_read_your_writes_violations_exact(spark) -> None:
    found = agreed(spark, READS, "staleness")
    assert {a.kind for a in found} == {"ryw-violation"}
    # r10 (its own delete not seen), r1, r5 and r6, in (store, key, time) order
    assert sorted((a.store, a.key, a.time) for a in found) == [
        ("cache", "d", 61),
        ("cache", "k", 13),
        ("cache", "k", 52),
        ("source", "k", 52),
    ]


@pytest.mark.spark
def test_lag_per_store(spark) -> None:
    assert agree_on_lag(spark, LAGS) == {
        "cache": {"count": 4, "p50_ms": 1.0, "p95_ms": 5.0, "p99_ms": 5.0, "max_ms": 5.0},
        "search": {"count": 1, "p50_ms": 11.0, "p95_ms": 11.0, "p99_ms": 11.0, "max_ms": 11.0},
    }


@pytest.mark.spark
def test_lag_series_buckets_by_second(spark) -> None:
    events = [
        write(0, "a", "a1", 1),
        apply(4 * MS, "cache", "a", "a1", 1),
        write(1_500 * MS, "b", "b1", 1),
        apply(1_502 * MS, "cache", "b", "b1", 1),
        write(1_600 * MS, "c", "c1", 1),
        apply(1_610 * MS, "cache", "c", "c1", 1),
    ]
    _, series = spark_lag(spark, events)
    assert series == [
        {"t": 0, "store": "cache", "count": 1, "p50_ms": 4.0, "max_ms": 4.0},
        {"t": 1, "store": "cache", "count": 2, "p50_ms": 2.0, "max_ms": 10.0},
    ]
