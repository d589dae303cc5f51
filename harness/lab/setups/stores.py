"""The store plumbing every architecture shares: the source table's upsert, how a
failed PostgreSQL or Redis call maps to its Jepsen completion, and the search index.

A setup's source is `<namespace>.<table>(key, value, version)`: every write (and delete,
a tombstone with `value` NULL) increments the key's `version` in the same statement
(`UPSERT`), so `ok` ops carry the source's commit order per key.

The search index is an embedded tantivy index, one per run namespace: a write becomes
visible to readers only after the index writer commits and the reader reloads, exactly
like the refresh interval of Elasticsearch or Solr, and it needs no JVM or server.
Documents are `(key, value, version)`; updates are a delete of the key's term followed by
an add, applied in call order, so the final state reflects the order in which the
application reached the index (which is what the dual-write race is about).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import redis
import tantivy
from psycopg import sql

from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.setups.connect import (
    TimedConnection,
    app_pg_connect,
    direct_pg_connect,
    redis_client,
)

CACHE = "cache"
"""The derived key-value store (Redis) of the architectures that keep one."""
SEARCH = "search"
"""The derived search index."""

UPSERT = """
INSERT INTO {table} AS t (key, value, version) VALUES (%s, %s, 1)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = t.version + 1
RETURNING version
"""
"""Write (or tombstone, value None) a key of a source table, bumping its version."""


State = dict[str, tuple[str, int | None]]
"""One store's final contents: key -> (value, version)."""


def create_source_table(pg_direct: str, namespace: str, name: str = "items") -> sql.Identifier:
    """Create `<namespace>.<name>(key, value, version)`, the source table every setup
    writes through `UPSERT` (and the schema, when it is the run's first table)."""
    table = sql.Identifier(namespace, name)
    with direct_pg_connect(pg_direct) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(namespace)))
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (key text PRIMARY KEY, value text, version bigint NOT NULL)"
            ).format(table)
        )
    return table


def source_rows(pg_direct: str, table: sql.Identifier) -> State:
    """The live rows of a source table (tombstones, value NULL, left out)."""
    with direct_pg_connect(pg_direct) as conn:
        rows = conn.execute(
            sql.SQL("SELECT key, value, version FROM {} WHERE value IS NOT NULL").format(table)
        ).fetchall()
    return {k: (v, ver) for k, v, ver in rows}


def redis_hashes(ep: Endpoint | None, prefix: str) -> State:
    """Every `(value, version)` hash under `prefix` in Redis, by key (prefix removed)."""
    r = redis_client(ep, timeout=5.0)
    try:
        found: State = {}
        for full in r.scan_iter(match=f"{prefix}*", count=500):
            h = r.hgetall(full)
            if "value" in h:
                found[full[len(prefix) :]] = (h["value"], int(h["version"]))
        return found
    finally:
        r.close()


class Outcome(Exception):
    """A failed store call with its Jepsen completion: `fail` (did not happen) or `info`."""

    def __init__(self, phase: str, error: str) -> None:
        super().__init__(error)
        self.phase = phase


def classify_pg(exc: Exception) -> Outcome:
    """The Outcome of a failed PostgreSQL call."""
    # A lost connection after the statement was sent leaves the commit unknown.
    if isinstance(exc, psycopg.OperationalError) and "connect" not in str(exc).lower():
        return Outcome("info", str(exc).strip()[:300])
    return Outcome("fail", str(exc).strip()[:300])


class AppConnection:
    """An application's PostgreSQL connection on its link: opened on first use, and
    again after a failure closed it. Its failures are Outcomes."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self._pg: TimedConnection | None = None

    @property
    def is_open(self) -> bool:
        """Whether a connection is open (a transaction may be in it)."""
        return self._pg is not None and not self._pg.closed

    def get(self) -> TimedConnection:
        """The open connection, connecting first if there is none (refused: `fail`)."""
        if self._pg is None or self._pg.closed:
            try:
                self._pg = app_pg_connect(self.conninfo)
            except psycopg.Error as exc:
                raise Outcome("fail", f"connect: {exc}".strip()[:300]) from exc
        return self._pg

    @contextlib.contextmanager
    def failing(self) -> Iterator[TimedConnection]:
        """The connection for one exchange; a failed call closes it, with whatever
        transaction it held, and raises its Outcome (a lost answer: `info`)."""
        conn = self.get()
        try:
            yield conn
        except psycopg.Error as exc:
            self.close()
            raise classify_pg(exc) from exc

    def close(self) -> None:
        """Close the connection, ignoring errors."""
        if self._pg is not None:
            with contextlib.suppress(Exception):
                self._pg.close()


def classify_redis(exc: Exception) -> Outcome:
    """The Outcome of a failed Redis call."""
    text = str(exc)[:300]
    if isinstance(exc, redis.TimeoutError):
        return Outcome("info", text)
    return Outcome(
        "fail" if "refused" in text.lower() or "connect" in text.lower() else "info", text
    )


class SearchIndex:
    """A key-value view over a tantivy index, safe to share between threads.

    `write`/`delete` stage a change in the index writer; `commit` makes the staged
    changes visible to `get`. The caller decides when to commit: after every write (a
    synchronous view) or on a timer (an asynchronous view, see `dual_write`).
    """

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        builder = tantivy.SchemaBuilder()
        # The raw tokenizer keeps a key as one exact term, so delete-by-term hits it.
        builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
        builder.add_text_field("value", stored=True, tokenizer_name="raw", index_option="basic")
        builder.add_integer_field("version", stored=True)
        self._schema = builder.build()
        self._index = tantivy.Index(self._schema, path=str(path), reuse=False)
        self._writer = self._index.writer(heap_size=15_000_000, num_threads=1)
        self._lock = threading.Lock()
        self.path = path

    def write(self, key: str, value: str, version: int | None) -> None:
        """Stage `key = value` (replacing any document of the key)."""
        doc = tantivy.Document(key=key, value=value, version=version if version else 0)
        with self._lock:
            self._writer.delete_documents_by_term("key", key)
            self._writer.add_document(doc)

    def delete(self, key: str) -> None:
        """Stage the removal of `key`."""
        with self._lock:
            self._writer.delete_documents_by_term("key", key)

    def commit(self) -> None:
        """Make every staged change visible to readers."""
        with self._lock:
            self._writer.commit()
        self._index.reload()

    def get(self, key: str) -> tuple[str, int | None] | None:
        """The visible `(value, version)` of `key`, or None if the key has no document."""
        searcher = self._index.searcher()
        query = tantivy.Query.term_query(self._schema, "key", key)
        hits = searcher.search(query, limit=1).hits
        if not hits:
            return None
        doc = searcher.doc(hits[0][1])
        version = doc.get_first("version")
        return doc.get_first("value"), (int(version) or None) if version is not None else None

    def items(self) -> dict[str, tuple[str, int | None]]:
        """Every visible document as `key -> (value, version)`."""
        searcher = self._index.searcher()
        n = searcher.num_docs
        if n == 0:
            return {}
        out: dict[str, tuple[str, int | None]] = {}
        for _score, address in searcher.search(tantivy.Query.all_query(), limit=n).hits:
            doc = searcher.doc(address)
            version = doc.get_first("version")
            out[doc.get_first("key")] = (doc.get_first("value"), int(version) or None)
        return out

    def close(self) -> None:
        """Commit what is staged and release the writer's lock on the directory."""
        with self._lock:
            self._writer.commit()
            self._writer.wait_merging_threads()
