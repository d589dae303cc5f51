"""History events as Spark DataFrames, with the one schema of harness.history.schema."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from harness.history.schema import COLUMNS, INT_COLUMNS, Event


def history_schema() -> StructType:
    """The Spark schema of a history table (every column nullable but `type`)."""
    return StructType(
        [
            StructField(c, LongType() if c in INT_COLUMNS else StringType(), c != "type")
            for c in COLUMNS
        ]
    )


def events_to_df(spark: SparkSession, events: Iterable[Event]) -> DataFrame:
    """A DataFrame of a small in-memory history (tests, the simulator)."""
    rows = [tuple(getattr(e, c) for c in COLUMNS) for e in events]
    return spark.createDataFrame(rows, schema=history_schema())
