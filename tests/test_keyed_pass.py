"""The keyed pass (checkers.keyed): the cut of a history into groups loses nothing the
whole-history reference finds, and the Spark pass gives the reference's rows, evidence
included, its notes and its lag."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from keyed_support import any_history, pass_rows
from pyspark.sql import functions as F

from checkers.anomaly import ANOMALY_COLUMNS, Anomaly
from checkers.keyed.facts import facts_of
from checkers.keyed.step import ANOMALY, NOTE, REALTIME_SERIES, group_history, judge
from checkers.keyed.timeline import SERIES_ROW
from checkers.reference import (
    divergence,
    duplicates,
    eventsourcing,
    graph,
    lost,
    reorder,
    staleness,
)
from checkers.reference.reorder import RealtimeLag
from harness.history.schema import Event

REFERENCE = (lost, duplicates, reorder, divergence, staleness, eventsourcing, graph)


def reference_whole(events: list[Event]) -> Counter[Anomaly]:
    """Every anomaly of every reference checker over the whole history."""
    found: Counter[Anomaly] = Counter()
    for checker in REFERENCE:
        try:
            found.update(checker.check(events))
        except ValueError:  # a malformed invariant: the checker fails as a whole
            assert checker is eventsourcing
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_history())
def test_the_groups_find_what_the_whole_history_holds(events: list[Event]) -> None:
    judged = judge(group_history(events), facts_of(events))
    expected = reference_whole(events)
    failed = set(judged.errors)
    assert failed <= {"eventsourcing"}
    got = Counter(a for a in judged.anomalies if a.checker not in failed)
    assert got == Counter({a: n for a, n in expected.items() if a.checker not in failed})
    assert {k: v for k, v in judged.notes.items() if v} == {
        k: v for k, v in lost.notes(events).items() if v
    }
    delays = Counter(staleness.lag_rows(events))
    assert Counter(judged.lags) == delays
    assert Counter(judged.realtime) == Counter(reorder.worst_realtime_lags(events))


@pytest.mark.spark
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_history())
def test_spark_gives_the_reference_rows_with_their_evidence(spark, events: list[Event]) -> None:
    """The agreement test of the whole pass: every checker at once, on every strategy
    (each checker's own test samples fewer histories, for that checker alone)."""
    try:
        eventsourcing.bounds(events)
    except ValueError:
        return  # the failing checker is tested apart: pass_rows fails on any error
    rows, _ = pass_rows(spark, events)
    got = Counter(
        Anomaly(*(r[c] for c in ANOMALY_COLUMNS))
        for r in rows.filter(F.col("out") == ANOMALY).collect()
    )
    assert got == reference_whole(events)
    notes: Counter[str] = Counter()
    for r in rows.filter(F.col("out") == NOTE).collect():  # a row per partition
        notes[r["kind"]] += r["n"]
    assert {k: v for k, v in notes.items() if v} == {
        k: v for k, v in lost.notes(events).items() if v
    }
    realtime = rows.filter((F.col("out") == SERIES_ROW) & (F.col("kind") == REALTIME_SERIES))
    got_lags = Counter(RealtimeLag.from_dict(json.loads(r["detail"])) for r in realtime.collect())
    assert got_lags == Counter(reorder.worst_realtime_lags(events))
