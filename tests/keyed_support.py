"""The keyed pass of driftlab.checkers.keyed as the checker tests call it: a small in-memory
history in, one checker's anomaly rows, the notes or the lag figures out."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st
from pyspark.sql import DataFrame
from strategies_messages import combined_histories
from strategies_states import histories, identities, spark_identities

from driftlab.checkers.anomaly import ANOMALY_COLUMNS, SPARK_DDL, Anomaly
from driftlab.checkers.figures import PassFigures
from driftlab.checkers.keyed.spark import keyed_pass
from driftlab.checkers.reference import CHECKERS
from driftlab.harness.history.reader import arrow_schema
from driftlab.harness.history.schema import COLUMNS, Event

ROW_GROUP_ROWS = 64
"""Small row groups, a map task each: the tests' histories are cut into several map
tasks, as a large history is."""


@dataclass
class PassOutput:
    """What the keyed pass made of a history: its anomalies (as anomalies.parquet holds
    them, in its order), its figures and its clock span."""

    anomalies: list[Anomaly]
    figures: PassFigures
    span: tuple[int, int]


def run_pass(spark: Any, events: list[Event], *, whole: bool = False) -> PassOutput:
    """The keyed pass over the history, in its three stages or, if `whole`, as the one
    task of a small history; a checker's failure fails the test with its error."""
    with tempfile.TemporaryDirectory(prefix="driftlab-pass-") as tmp:
        history = Path(tmp) / "history.parquet"
        pq.write_table(history_table(events), history, row_group_size=ROW_GROUP_ROWS)
        done = keyed_pass(
            spark,
            history,
            Path(tmp) / "anomalies.parquet",
            len(events),
            rows_per_slice=ROW_GROUP_ROWS,
            whole_rows=len(events) if whole else 0,
        )
        found = pq.read_table(Path(tmp) / "anomalies.parquet").to_pylist()
    assert not done.figures.errors, next(iter(done.figures.errors.values()))
    anomalies = [Anomaly(*(r[c] for c in ANOMALY_COLUMNS)) for r in found]
    return PassOutput(anomalies, done.figures, (done.t0_ns, done.t1_ns))


def history_table(events: list[Event]) -> pa.Table:
    """The events as the history's Parquet holds them."""
    return pa.table({c: [getattr(e, c) for e in events] for c in COLUMNS}, schema=arrow_schema())


def spark_check(spark: Any, events: list[Event], checker: str) -> DataFrame:
    """`checker`'s anomaly rows (driftlab.checkers.anomaly.SPARK_DDL) found by the keyed pass."""
    found = [a for a in run_pass(spark, events).anomalies if a.checker == checker]
    return spark.createDataFrame(
        [tuple(getattr(a, c) for c in ANOMALY_COLUMNS) for a in found], SPARK_DDL
    )


def agreed(spark: Any, events: list[Event], checker: str) -> list[Anomaly]:
    """The reference `checker`'s anomalies, after checking that the keyed pass finds the
    same identities."""
    found = CHECKERS[checker].check(events)
    assert spark_identities(spark_check(spark, events, checker)) == identities(found)
    return found


def spark_notes(spark: Any, events: list[Event]) -> dict[str, int]:
    """The notes' counts (every note, zero included)."""
    notes = {"unseen-message": 0, "recovered-write": 0}
    notes.update(run_pass(spark, events).figures.notes)
    return notes


def spark_lag(spark: Any, events: list[Event]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The lag figures of analysis.json and the lag series of series.json."""
    figures = run_pass(spark, events).figures
    return figures.lag, figures.lag_series


def any_history() -> st.SearchStrategy[list[Event]]:
    """Message histories, state histories, and both in one history."""
    return st.one_of(
        combined_histories(),
        histories(),
        st.tuples(combined_histories(), histories()).map(lambda p: p[0] + p[1]),
    )
