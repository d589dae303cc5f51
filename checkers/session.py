"""The one SparkSession of a process: local[*] by default, quiet, any master accepted."""

from __future__ import annotations

import os
import sys
import threading

from pyspark.sql import SparkSession

_lock = threading.Lock()


def get_spark(master: str | None = None) -> SparkSession:
    """Return the process's SparkSession, creating it on first use.

    `master` is any Spark master URL (`local[*]`, `spark://host:7077`); the default is
    `$DRIFTLAB_SPARK_MASTER` or `local[*]`. A later call with another master gets the
    existing session: one session per process.
    """
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        url = master or os.environ.get("DRIFTLAB_SPARK_MASTER", "local[*]")
        # The keyed pass runs driftlab's checks in Python workers: they need this
        # environment's packages (pyarrow, driftlab itself), not the system python3.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (
            SparkSession.builder.master(url)
            .appName("driftlab")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            # Histories are modest per run; few shuffle partitions keep 2 cores busy
            # without drowning them in scheduling overhead.
            .config("spark.sql.shuffle.partitions", os.environ.get("DRIFTLAB_SHUFFLE", "8"))
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        return spark
