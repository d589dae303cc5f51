"""PySpark checkers for histories of any size.

Each module `checkers.spark.<checker>` has `check(events: DataFrame) -> DataFrame`
returning rows of `checkers.anomaly.SPARK_DDL`, in agreement with the reference module of
the same name.
"""
