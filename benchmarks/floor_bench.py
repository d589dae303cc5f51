"""The same three SQL queries in Spark and DuckDB: what one pass of each kind costs.

Every checker is built of these steps: a hash aggregation, a window in time order and
an equi-join. Run alone, as identical SQL over the same history.parquet, they show how
far apart the two engines are on this machine before any checker's design enters, so
the suite's ratio can be read against them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
from pyspark.sql import SparkSession

QUERIES: dict[str, str] = {
    "aggregate": """
        SELECT count(*) FROM (
          SELECT consumer, msg_id, count(*) AS n FROM h
          WHERE type = 'msg' AND action = 'deliver' AND msg_id IS NOT NULL
          GROUP BY consumer, msg_id)
        WHERE n > 1""",
    "window": """
        SELECT count(*) FROM (
          SELECT version, max(version) OVER (
            PARTITION BY store, key ORDER BY time, writer, seq
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS seen
          FROM h WHERE type = 'msg' AND action IN ('apply', 'deliver'))
        WHERE version < seen""",
    "join": """
        SELECT count(*) FROM h e JOIN h w ON e.key = w.key AND e.value = w.value
        WHERE e.type = 'msg' AND e.action = 'apply'
          AND w.type = 'op' AND w.store = 'source' AND w.phase = 'ok'""",
}


@dataclass(frozen=True, slots=True)
class Floor:
    """One query's seconds in each engine and the count both must agree on."""

    query: str
    spark_s: float
    duckdb_s: float
    spark_count: int
    duckdb_count: int

    @property
    def ratio(self) -> float:
        return self.spark_s / self.duckdb_s


def measure_floor(spark: SparkSession, history: Path) -> list[Floor]:
    """Each query of QUERIES timed in Spark (after one warm-up run) and in DuckDB."""
    spark.read.parquet(str(history)).createOrReplaceTempView("h")
    con = duckdb.connect()
    con.execute(f"CREATE VIEW h AS SELECT * FROM read_parquet('{history}')")
    floors = []
    for name, sql in QUERIES.items():
        spark.sql(sql).collect()  # code generation and class loading are not the floor
        t = time.perf_counter()
        spark_n = spark.sql(sql).collect()[0][0]
        spark_s = time.perf_counter() - t
        t = time.perf_counter()
        duck_n = con.execute(sql).fetchone()[0]
        duck_s = time.perf_counter() - t
        floors.append(Floor(name, spark_s, duck_s, int(spark_n), int(duck_n)))
    con.close()
    spark.catalog.dropTempView("h")
    return floors
