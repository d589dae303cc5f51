"""A compacted-log workload client: it writes and deletes source rows, bumping each key's
version in the same transaction."""

from __future__ import annotations

import psycopg
from psycopg import sql

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.lab.setups.base import SourceChangeClient
from driftlab.harness.lab.setups.stores import AppConnection, Outcome

_BUMP = """
INSERT INTO {versions} AS v (key, version) VALUES (%s, 1)
ON CONFLICT (key) DO UPDATE SET version = v.version + 1 RETURNING version
"""
_WRITE = """
INSERT INTO {table} AS t (key, value, version) VALUES (%s, %s, %s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version
"""


class CompactedClient(SourceChangeClient):
    """One application instance writing and deleting rows of the source table."""

    def __init__(
        self,
        recorder: Recorder,
        process: str,
        pg_app: str,
        table: sql.Identifier,
        versions: sql.Identifier,
    ) -> None:
        super().__init__(recorder, process)
        self.table = table
        self.versions = versions
        self.pg = AppConnection(pg_app)

    def read(self, key: str, store: str) -> None:
        """Not offered: the rebuilt store exists only after the workload."""
        raise ValueError("compacted-log has no reads; use a write and delete mix")

    def close(self) -> None:
        """Close the connection, ignoring errors."""
        self.pg.close()

    def change(self, op: str, key: str, value: str | None) -> None:
        """Upsert the row with the key's next version; for None delete it (a delete
        event and a tombstone; absent: nothing to do)."""
        s = self
        version: int | None = None
        try:
            with self.pg.failing() as conn, conn.transaction():
                # The key's version row first: it orders one key's operations.
                row = conn.execute(sql.SQL(_BUMP).format(versions=s.versions), (key,)).fetchone()
                assert row is not None
                version = int(row[0])
                if value is not None:
                    conn.execute(sql.SQL(_WRITE).format(table=s.table), (key, value, version))
                else:
                    gone = conn.execute(
                        sql.SQL("DELETE FROM {} WHERE key = %s").format(s.table), (key,)
                    )
                    if gone.rowcount == 0:
                        version = None  # nothing deleted: keep the version unused
                        raise psycopg.Rollback()
        except Outcome as o:
            self.rec.complete(op, o.phase, error=str(o))
            return
        self.rec.complete(op, "ok", version=version)
