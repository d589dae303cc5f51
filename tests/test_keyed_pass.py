"""The keyed pass (driftlab.checkers.keyed): the cut of a history into groups loses nothing the
whole-history reference finds, and the Spark pass gives the reference's rows, evidence
included, its notes and its lag."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from keyed_support import ROW_GROUP_ROWS, any_history, history_table, run_pass
from strategies_states import apply, write

from driftlab.checkers.anomaly import ALL_KINDS, Anomaly
from driftlab.checkers.coverage import chances
from driftlab.checkers.keyed.facts import facts_of
from driftlab.checkers.keyed.spark import (
    _CORRUPT,
    _UNSEEN,
    PASS_JOBS,
    _read,
    _write,
    keyed_pass,
    task_failure,
)
from driftlab.checkers.keyed.step import REALTIME_SERIES, group_history, judge
from driftlab.checkers.outputs import ANOMALY_ORDER
from driftlab.checkers.reference import CHECKERS, eventsourcing, lost, reorder, staleness
from driftlab.checkers.reference.reorder import RealtimeLag
from driftlab.checkers.series import bucket_seconds
from driftlab.harness.history.errors import HistoryError
from driftlab.harness.history.schema import Event


def reference_whole(events: list[Event]) -> Counter[Anomaly]:
    """Every anomaly of every reference checker over the whole history."""
    found: Counter[Anomaly] = Counter()
    for checker in CHECKERS.values():
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
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_history(), st.booleans())
def test_spark_gives_the_reference_rows_with_their_evidence(
    spark, events: list[Event], whole: bool
) -> None:
    """The agreement test of the keyed pass: every checker at once, evidence and order
    included, on message histories, state histories and both in one; one pass an example,
    in three stages or as a small history's one task (the checkers' own tests hold
    hand-made histories)."""
    try:
        eventsourcing.bounds(events)
    except ValueError:
        return  # the failing checker is tested apart: run_pass fails on any error
    out = run_pass(spark, events, whole=whole)
    assert Counter(out.anomalies) == reference_whole(events)
    order = [
        tuple((getattr(a, c) is not None, getattr(a, c)) for c in ANOMALY_ORDER)
        for a in out.anomalies
    ]
    assert order == sorted(order)
    assert {k: v for k, v in out.figures.notes.items() if v} == {
        k: v for k, v in lost.notes(events).items() if v
    }
    # The summary's percentiles are exact nearest ranks, as the reference's.
    assert out.figures.lag == staleness.lag(events)
    # Each kind's chances, counted in the same pass, are the reference's.
    assert {k: out.figures.chances.get(k, 0) for k in ALL_KINDS} == chances(events)
    realtime = out.figures.history_series[REALTIME_SERIES]
    got_lags = Counter(RealtimeLag.from_dict(r) for r in realtime)
    assert got_lags == Counter(reorder.worst_realtime_lags(events))


@pytest.mark.spark
def test_the_chances_come_from_the_passs_own_jobs(spark) -> None:
    """Coverage adds no Spark job nor pass over the history: the pass's jobs count every
    kind's chances beside its anomalies."""
    events = [
        write(0, "a", "a1", 1, phase="invoke", op_id="o1"),
        write(1_000, "a", "a1", 1, op_id="o1"),
        apply(5_000, "cache", "a", "a1", 1),
        write(6_000, "a", "a2", 2, op_id="o2"),
        apply(7_000, "cache", "a", "a2", 2),
    ]
    sc = spark.sparkContext
    sc.setJobGroup("coverage-one-job", "the keyed pass and its chances")
    try:
        out = run_pass(spark, events)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert len(sc.statusTracker().getJobIdsForGroup("coverage-one-job")) == PASS_JOBS
    assert out.figures.chances["stale-overwrite"] == 1
    assert {k: out.figures.chances.get(k, 0) for k in ALL_KINDS} == chances(events)


@pytest.mark.spark
def test_a_run_of_an_hour_is_bucketed_by_three_seconds(spark) -> None:
    # Over 2400 s the bucket is 3 s or more: 3 s in ns once overflowed a 32-bit product.
    s = 1_000_000_000
    events = [
        write(0, "a", "a1", 1, phase="invoke", op_id="o1"),
        write(1_000_000, "a", "a1", 1, op_id="o1"),
        apply(5_000_000, "cache", "a", "a1", 1),
        write(3_597 * s, "b", "b1", 1, phase="invoke", op_id="o2"),
        write(3_597 * s + 2_000_000, "b", "b1", 1, op_id="o2"),
        apply(3_598 * s, "cache", "b", "b1", 1),
    ]
    out = run_pass(spark, events)
    assert bucket_seconds(*out.span) == 3
    ops = out.figures.history_series["ops"]
    assert [(r["t"], r["ok"]) for r in ops] == [(0, 1), (3597, 1)]
    assert [(r["t"], r["count"]) for r in out.figures.lag_series] == [(0, 1), (3597, 1)]


@pytest.mark.spark
def test_the_exchange_folder_goes_with_the_pass(spark, tmp_path: Path) -> None:
    # The routed rows go through files beside the anomalies: none stays after a pass,
    # nor after one that failed on a corrupt row group.
    events = [write(i, f"k{i % 7}", f"v{i}", i) for i in range(300)]
    history = tmp_path / "history.parquet"
    pq.write_table(history_table(events), history, row_group_size=ROW_GROUP_ROWS)
    keyed_pass(spark, history, tmp_path / "anomalies.parquet", len(events), rows_per_slice=64)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["anomalies.parquet", "history.parquet"]
    meta = pq.ParquetFile(history).metadata
    start = meta.row_group(2).column(1).data_page_offset
    with history.open("r+b") as f:
        f.seek(start)
        f.write(b"\xff" * 64)
    (tmp_path / "anomalies.parquet").unlink()
    with pytest.raises(HistoryError, match="cannot be read"):
        keyed_pass(spark, history, tmp_path / "anomalies.parquet", len(events), rows_per_slice=64)
    assert [p.name for p in tmp_path.iterdir()] == ["history.parquet"]


def test_a_task_that_cannot_see_a_file_says_the_folder_must_be_shared() -> None:
    failed = "org.apache.spark.api.python.PythonException: RuntimeError: "
    told = task_failure(
        f"{failed}{_UNSEEN} /mnt/runs/x/.exchange-1/r-0-0.arrow\n  at", Path("h"), 4
    )
    assert isinstance(told, RuntimeError)
    assert "cannot see /mnt/runs/x/.exchange-1/r-0-0.arrow" in str(told)
    assert "storage that the driver and every worker see" in str(told)
    told = task_failure(f"{failed}{_CORRUPT} 2-3: bad page\n", Path("h.parquet"), 4)
    assert isinstance(told, HistoryError) and "row groups 2-3 of 4: bad page" in str(told)
    assert task_failure(f"{failed}ZeroDivisionError", Path("h"), 4) is None


def test_a_missing_exchange_file_or_folder_is_named(tmp_path: Path) -> None:
    # What a worker that does not see the driver's folder meets, told as task_failure reads.
    table = pa.table({"a": [1, 2]})
    with pytest.raises(RuntimeError, match=f"^{_UNSEEN} {tmp_path / 'gone'}$"):
        _write(str(tmp_path / "gone" / "r-0-0.arrow"), table)
    with pytest.raises(RuntimeError, match=f"^{_UNSEEN} {tmp_path / 'r-0-0.arrow'}$"):
        _read(str(tmp_path / "r-0-0.arrow"))
    assert _read(_write(str(tmp_path / "r-0-0.arrow"), table)).equals(table)
    assert _read(_write(str(tmp_path / "r-0-1.arrow"), table, compressed=False)).equals(table)
