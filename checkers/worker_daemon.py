"""The daemon of the analysis's Spark Python workers: pyspark's own, with the JVM's
archives taken off its import path.

Spark starts every Python worker with its home's `pyspark.zip`, `py4j-*.zip` and the
`spark-core` jar on PYTHONPATH, ahead of the environment's site-packages. Before each
task, pyspark's worker calls `importlib.invalidate_caches()`
(pyspark.worker_util.setup_spark_files), and a zip importer answers that by reading its
archive's whole directory again: some 150 ms a task for these three on this machine,
which made an 8-task job of nothing take 0.65 s and a small run's analysis pay it on
every one of its tasks. driftlab.checkers.session names this module as
`spark.python.daemon.module`: it drops those archives, when the environment has pyspark
installed without them, chooses the workers' Arrow allocator, and runs pyspark's
daemon, the pass's modules imported for its workers to inherit.
"""

from __future__ import annotations

import os
import runpy
import sys
from importlib.machinery import PathFinder


def _spark_archive(entry: str) -> bool:
    """A JVM archive, or a zip of Spark's home (`python/lib`), on the import path."""
    return entry.endswith(".jar") or (entry.endswith(".zip") and "/python/lib/" in entry)


def drop_spark_archives() -> list[str]:
    """Take Spark's archives off sys.path (and their importers out of its cache) if
    pyspark can be imported without them; the entries dropped."""
    kept = [p for p in sys.path if not _spark_archive(p)]
    if PathFinder.find_spec("pyspark", kept) is None:
        return []  # a Spark distribution without a pip-installed pyspark needs its zips
    dropped = [p for p in sys.path if _spark_archive(p)]
    sys.path[:] = kept
    for entry in list(sys.path_importer_cache):
        if any(entry.startswith(d) for d in dropped):
            del sys.path_importer_cache[entry]
    return dropped


if __name__ == "__main__":
    # Two workers on two cores, each allocating and freeing large Arrow buffers: with
    # the C library's allocator, not pyarrow's default mimalloc, their steps took 8-14%
    # less CPU side by side, and the 5M pass some 4% less time (alternated A B).
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    drop_spark_archives()
    # Imported once here, before the daemon forks its workers, instead of once in each
    # worker: the pass's modules (pyarrow, numpy, DuckDB, the checkers) take one to three
    # CPU seconds to import, which each of a cold analysis's workers paid again; and
    # pandas, which pyarrow imports the first time it converts a Python list (every
    # task of the pass does): 0.26 s of CPU in each worker.
    import pandas  # noqa: F401

    import driftlab.checkers.keyed.spark  # noqa: F401

    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
