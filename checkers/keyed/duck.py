"""The process's one in-memory DuckDB, which the keyed pass's vectorized steps query.

A new in-memory database costs some 16 ms to create, and a pass creates a few per task:
each step takes a cursor of this one instead, which costs microseconds and takes its
registered tables and TEMP views with it when it closes.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import duckdb

_db: duckdb.DuckDBPyConnection | None = None
_pid = 0
"""The process that opened `_db`: a forked Spark worker opens its own."""
_lock = threading.Lock()


@contextlib.contextmanager
def cursor() -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection of its own to the process's DuckDB, closed after the block."""
    global _db, _pid
    with _lock:
        if _db is None or _pid != os.getpid():
            _db = duckdb.connect()
            # Spark runs one Python worker per core: more DuckDB threads would only contend.
            _db.execute("SET threads TO 1")
            _pid = os.getpid()
        con = _db.cursor()
    try:
        yield con
    finally:
        con.close()
