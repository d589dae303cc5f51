"""How the analysis's Spark starts: off the main thread, its JVM's log in the run's
log, and ahead of the first analysis with its Python workers warm (`warm_up`)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from driftlab.checkers.session import get_spark

log = logging.getLogger("driftlab.analyze")


def warm_up(master: str | None, log_path: Path) -> threading.Thread:
    """Start the process's Spark session in a background thread, its JVM's log lines in
    `log_path`, and run one job that starts a Python worker per core with the pass's
    modules imported: `driftlab suite` and `driftlab run` call it before the first run,
    so that the first verdict does not wait for the JVM while the run mostly waits on
    services. A failure here is only logged (at info level, never on the terminal): the
    analysis starts Spark itself and says why."""

    def start() -> None:
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            start_workers(start_spark(master, log_path).sparkContext)
        except Exception:
            log.info("Spark did not start ahead of the analysis", exc_info=True)

    thread = threading.Thread(target=start, name="driftlab-spark-warm-up", daemon=True)
    thread.start()
    return thread


def start_workers(sc: SparkContext) -> None:
    """Run one job that starts a Python worker per core with the pass's modules
    imported, so that the first analysis finds them ready."""
    cores = sc.defaultParallelism
    sc.parallelize(range(cores), cores).foreach(_import_the_pass)


def _import_the_pass(_: object) -> None:
    import driftlab.checkers.keyed.spark  # noqa: F401 (imported for a worker that runs it next)


def start_spark(master: str | None, log_path: Path) -> SparkSession:
    """The process's session; a new JVM gets `log_path` as its stderr, so Spark's own
    log lines land in the run's log instead of the terminal."""
    # The process's session, whichever thread started it (the active session is the
    # starting thread's only).
    if SparkSession._instantiatedSession is not None:
        return get_spark(master)
    return _started_aside(master, log_path)


def _started_aside(master: str | None, log_path: Path) -> SparkSession:
    """get_spark on a thread of its own. Started on the main thread, PySpark puts its
    own SIGINT handler in place while the JVM starts, and a Ctrl-C then came out as a
    Py4J error ("the analysis failed") instead of the interrupt; the main thread only
    waits here, under the caller's handler (driftlab.checkers.session.interruptible)."""
    found: dict[str, Any] = {}

    def start() -> None:
        try:
            found["spark"] = get_spark(master, log_path)
        except BaseException as e:
            found["error"] = e

    thread = threading.Thread(target=start, name="driftlab-spark-start", daemon=True)
    thread.start()
    thread.join()
    if "error" in found:
        raise found["error"]
    return found["spark"]
