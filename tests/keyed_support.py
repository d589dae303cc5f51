"""The keyed pass of checkers.keyed as the checker tests call it: a small in-memory
history in, one checker's anomaly rows, the notes or the lag figures out."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from strategies_messages import combined_histories
from strategies_states import histories

from checkers.anomaly import ANOMALY_COLUMNS
from checkers.figures import pass_figures
from checkers.keyed.spark import keyed_pass
from checkers.keyed.step import ANOMALY, ERROR, NOTE, OUTPUT_DDL
from checkers.series import bucket_seconds
from harness.history.reader import arrow_schema
from harness.history.schema import COLUMNS, Event

ROW_GROUP_ROWS = 64
"""Small row groups: the tests' histories are cut into several map tasks, as a large
history is."""


def pass_rows(spark: Any, events: list[Event]) -> tuple[DataFrame, tuple[int, int]]:
    """The pass's rows over the history (materialized) and its clock span; a checker's
    failure fails the test with its error."""
    with tempfile.TemporaryDirectory(prefix="driftlab-pass-") as tmp:
        history = Path(tmp) / "history.parquet"
        pq.write_table(history_table(events), history, row_group_size=ROW_GROUP_ROWS)
        span = keyed_pass(spark, history, Path(tmp) / "pass", len(events))
        found = spark.read.schema(OUTPUT_DDL).parquet(f"{tmp}/pass").collect()
    rows = spark.createDataFrame(found, OUTPUT_DDL)
    errors = rows.filter(F.col("out") == ERROR).collect()
    assert not errors, errors[0]["detail"]
    return rows, span


def history_table(events: list[Event]) -> pa.Table:
    """The events as the history's Parquet holds them."""
    return pa.table({c: [getattr(e, c) for e in events] for c in COLUMNS}, schema=arrow_schema())


def spark_check(spark: Any, events: list[Event], checker: str) -> DataFrame:
    """`checker`'s anomaly rows (checkers.anomaly.SPARK_DDL) found by the keyed pass."""
    rows, _ = pass_rows(spark, events)
    return rows.filter((F.col("out") == ANOMALY) & (F.col("checker") == checker)).select(
        *ANOMALY_COLUMNS
    )


def spark_notes(spark: Any, events: list[Event]) -> dict[str, int]:
    """The notes' counts (every note, zero included)."""
    rows, _ = pass_rows(spark, events)
    notes = {"unseen-message": 0, "recovered-write": 0}
    for r in rows.filter(F.col("out") == NOTE).collect():
        notes[r["kind"]] += r["n"]
    return notes


def spark_lag(spark: Any, events: list[Event]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The lag figures of analysis.json and the lag series of series.json."""
    rows, (t0, t1) = pass_rows(spark, events)
    figures = pass_figures(rows, t0, bucket_seconds(t0, t1))
    return figures.lag, figures.lag_series


def any_history() -> st.SearchStrategy[list[Event]]:
    """Message histories, state histories, and both in one history."""
    return st.one_of(
        combined_histories(),
        histories(),
        st.tuples(combined_histories(), histories()).map(lambda p: p[0] + p[1]),
    )
