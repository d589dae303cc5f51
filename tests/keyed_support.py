"""The keyed pass of checkers.keyed as the checker tests call it: a small in-memory
history in, one checker's anomaly rows, the notes or the lag figures out."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.anomaly import ANOMALY_COLUMNS
from checkers.figures import pass_figures
from checkers.frames import events_to_df
from checkers.keyed.spark import gather_facts, keyed_pass
from checkers.keyed.step import ANOMALY, ERROR, NOTE, OUTPUT_DDL
from checkers.series import bucket_seconds
from harness.history.schema import Event


def pass_rows(spark: Any, events: list[Event]) -> tuple[DataFrame, DataFrame, Any]:
    """The history as a frame, the pass's rows (materialized) and the facts; a
    checker's failure fails the test with its error."""
    df = events_to_df(spark, events)
    facts = gather_facts(df)
    rows = spark.createDataFrame(keyed_pass(df, facts, len(events)).collect(), OUTPUT_DDL)
    errors = rows.filter(F.col("out") == ERROR).collect()
    assert not errors, errors[0]["detail"]
    return df, rows, facts


def spark_check(spark: Any, events: list[Event], checker: str) -> DataFrame:
    """`checker`'s anomaly rows (checkers.anomaly.SPARK_DDL) found by the keyed pass."""
    _, rows, _ = pass_rows(spark, events)
    return rows.filter((F.col("out") == ANOMALY) & (F.col("checker") == checker)).select(
        *ANOMALY_COLUMNS
    )


def spark_notes(spark: Any, events: list[Event]) -> dict[str, int]:
    """The notes' counts (every note, zero included)."""
    _, rows, _ = pass_rows(spark, events)
    notes = {"unseen-message": 0, "recovered-write": 0}
    for r in rows.filter(F.col("out") == NOTE).collect():
        notes[r["kind"]] += r["n"]
    return notes


def spark_lag(spark: Any, events: list[Event]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The lag figures of analysis.json and the lag series of series.json."""
    _, rows, facts = pass_rows(spark, events)
    figures = pass_figures(rows, facts.t0_ns, bucket_seconds(facts.t0_ns, facts.t1_ns))
    return figures.lag, figures.lag_series
