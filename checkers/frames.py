"""The history's Spark schema: the one schema of harness.history.schema, for Spark."""

from __future__ import annotations

from pyspark.sql.types import LongType, StringType, StructField, StructType

from harness.history.schema import COLUMNS, INT_COLUMNS


def history_schema() -> StructType:
    """The Spark schema of a history table (every column nullable but `type`)."""
    return StructType(
        [
            StructField(c, LongType() if c in INT_COLUMNS else StringType(), c != "type")
            for c in COLUMNS
        ]
    )
