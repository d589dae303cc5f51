"""A workload client of a captured source: it writes the source table only, and reads
the source or the derived store (cdc's client, snapshot-stream's loader and client, and
the reads of outbox's)."""

from __future__ import annotations

import contextlib

import psycopg
import redis
from psycopg import sql

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.lab.setups.base import Client, ReadResult
from driftlab.harness.lab.setups.connect import redis_client
from driftlab.harness.lab.setups.stores import UPSERT, AppConnection, Outcome, classify_pg
from driftlab.scenarios.architectures.cdc.wiring import Wiring

_INCREMENT = """
INSERT INTO {table} AS t (key, value, version) VALUES (%s, '1', 1)
ON CONFLICT (key) DO UPDATE SET value = (t.value::bigint + 1)::text, version = t.version + 1
RETURNING value, version
"""


class CdcClient(Client):
    """One application instance: a PostgreSQL connection (writes) and a Redis one (reads)."""

    def __init__(self, wiring: Wiring, rec: Recorder, process: str) -> None:
        super().__init__(rec, process)
        self.wiring = wiring
        self.pg = AppConnection(wiring.pg_app)
        self._redis: redis.Redis | None = None

    def write(self, key: str, value: str) -> None:
        """Write the source (an increment of it with the counter effect)."""
        if self.wiring.counter:
            op = self.rec.invoke(self.process, "increment", key=key, store=SOURCE_STORE)
            self._source(op, (key,), _INCREMENT)
        else:
            op = self.rec.invoke(self.process, "write", key=key, value=value, store=SOURCE_STORE)
            self._source(op, (key, value), UPSERT)

    def delete(self, key: str) -> None:
        """A tombstone row: value NULL, version bumped (captured as an update)."""
        if self.wiring.counter:
            raise ValueError("the counter effect has no delete; use a write-only mix")
        op = self.rec.invoke(self.process, "delete", key=key, store=SOURCE_STORE)
        self._source(op, (key, None), UPSERT)

    def read(self, key: str, store: str) -> None:
        """Read `key` from the source or the derived store."""
        op = self.rec.invoke(self.process, "read", key=key, store=store)
        try:
            result = self._read(key, store)
        except Outcome as o:
            self.rec.complete(op, "fail", error=str(o))
            return
        self.rec.complete(op, "ok", value=result.value, version=result.version)

    def close(self) -> None:
        """Close the connections, ignoring errors."""
        self.pg.close()
        if self._redis is not None:
            with contextlib.suppress(Exception):
                self._redis.close()

    # --- internals -------------------------------------------------------------------

    def _source(self, op: str, args: tuple[str | None, ...], statement: str) -> None:
        try:
            with self.pg.failing() as conn:
                row = conn.execute(
                    sql.SQL(statement).format(table=self.wiring.source), args
                ).fetchone()
        except Outcome as o:
            self.rec.complete(op, o.phase, error=str(o))
            return
        assert row is not None
        if self.wiring.counter:
            self.rec.complete(op, "ok", value=row[0], version=int(row[1]))
        else:
            self.rec.complete(op, "ok", version=int(row[0]))

    def _read(self, key: str, store: str) -> ReadResult:
        if store == SOURCE_STORE:
            try:
                row = (
                    self.pg.get()
                    .execute(
                        sql.SQL("SELECT value, version FROM {} WHERE key = %s").format(
                            self.wiring.source
                        ),
                        (key,),
                    )
                    .fetchone()
                )
            except psycopg.Error as exc:
                raise classify_pg(exc) from exc
            if row is None or row[0] is None:
                return ReadResult(None, row[1] if row else None)
            return ReadResult(row[0], int(row[1]))
        w = self.wiring
        if store != w.store:
            raise ValueError(f"{w.setup} has no store {store!r}; use source or {w.store}")
        if self._redis is None:
            self._redis = redis_client(w.redis_app)
        name = w.prefix + key
        try:
            if self.wiring.counter:
                total = self._redis.get(name)
                return ReadResult(total)
            h = self._redis.hgetall(name)
        except redis.RedisError as exc:
            raise Outcome("fail", str(exc)[:300]) from exc
        return ReadResult(h["value"], int(h["version"])) if "value" in h else ReadResult(None)
