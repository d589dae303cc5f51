"""A compacted-log workload client: it writes and deletes source rows, bumping each key's
version in the same transaction."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from harness.history.schema import SOURCE_STORE
from harness.setups.base import Client
from harness.setups.connect import (
    app_pg_connect,
)
from harness.setups.stores import Outcome, classify_pg

if TYPE_CHECKING:
    from harness.architectures.compacted_log.setup import CompactedLog

_BUMP = """
INSERT INTO {versions} AS v (key, version) VALUES (%s, 1)
ON CONFLICT (key) DO UPDATE SET version = v.version + 1 RETURNING version
"""
_WRITE = """
INSERT INTO {table} AS t (key, value, version) VALUES (%s, %s, %s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version
"""


class CompactedClient(Client):
    """One application instance writing and deleting rows of the source table."""

    def __init__(self, setup: CompactedLog, process: str) -> None:
        self.setup = setup
        self.process = process
        self.rec = setup.context.recorder
        self._pg: psycopg.Connection | None = None

    def write(self, key: str, value: str) -> None:
        """Upsert the row with the key's next version."""
        op = self.rec.invoke(self.process, "write", key=key, value=value, store=SOURCE_STORE)
        self._change(op, key, value)

    def delete(self, key: str) -> None:
        """Delete the row (a delete event and a tombstone); absent: nothing to do."""
        op = self.rec.invoke(self.process, "delete", key=key, store=SOURCE_STORE)
        self._change(op, key, None)

    def read(self, key: str, store: str) -> None:
        """Not offered: the rebuilt store exists only after the workload."""
        raise ValueError("compacted-log has no reads; use a write and delete mix")

    def close(self) -> None:
        """Close the connection, ignoring errors."""
        if self._pg is not None:
            with contextlib.suppress(Exception):
                self._pg.close()

    def _change(self, op: str, key: str, value: str | None) -> None:
        s = self.setup
        version: int | None = None
        try:
            if self._pg is None or self._pg.closed:
                try:
                    self._pg = app_pg_connect(s.wiring.pg_app)
                except psycopg.Error as exc:
                    raise Outcome("fail", f"connect: {exc}".strip()[:300]) from exc
            try:
                with self._pg.transaction():
                    # The key's version row first: it orders one key's operations.
                    row = self._pg.execute(
                        sql.SQL(_BUMP).format(versions=s.versions), (key,)
                    ).fetchone()
                    assert row is not None
                    version = int(row[0])
                    if value is not None:
                        self._pg.execute(
                            sql.SQL(_WRITE).format(table=s.table), (key, value, version)
                        )
                    else:
                        gone = self._pg.execute(
                            sql.SQL("DELETE FROM {} WHERE key = %s").format(s.table), (key,)
                        )
                        if gone.rowcount == 0:
                            version = None  # nothing deleted: keep the version unused
                            raise psycopg.Rollback()
            except psycopg.Error as exc:
                with contextlib.suppress(Exception):
                    self._pg.close()
                raise classify_pg(exc) from exc
        except Outcome as o:
            self.rec.complete(op, o.phase, error=str(o))
            return
        self.rec.complete(op, "ok", version=version)
