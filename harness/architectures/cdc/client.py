"""A CDC workload client: it writes the source table only, and reads either store."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import psycopg
import redis
from psycopg import sql

from harness.architectures.cdc.protocol import (
    COUNTER,
)
from harness.history.schema import SOURCE_STORE
from harness.setups.base import Client, ReadResult
from harness.setups.connect import (
    app_pg_connect,
    redis_client,
)
from harness.setups.stores import UPSERT, Outcome, classify_pg

if TYPE_CHECKING:
    from harness.architectures.cdc.setup import Cdc

_INCREMENT = """
INSERT INTO {table} AS t (key, value, version) VALUES (%s, '1', 1)
ON CONFLICT (key) DO UPDATE SET value = (t.value::bigint + 1)::text, version = t.version + 1
RETURNING value, version
"""


class CdcClient(Client):
    """One application instance: a PostgreSQL connection (writes) and a Redis one (reads)."""

    def __init__(self, setup: Cdc, process: str) -> None:
        self.setup = setup
        self.process = process
        self.rec = setup.context.recorder
        self._pg: psycopg.Connection | None = None
        self._redis: redis.Redis | None = None

    def write(self, key: str, value: str) -> None:
        """Write the source (an increment of it with the counter effect)."""
        if self.setup.effect == COUNTER:
            op = self.rec.invoke(self.process, "increment", key=key, store=SOURCE_STORE)
            self._source(op, (key,), _INCREMENT)
        else:
            op = self.rec.invoke(self.process, "write", key=key, value=value, store=SOURCE_STORE)
            self._source(op, (key, value), UPSERT)

    def delete(self, key: str) -> None:
        """A tombstone row: value NULL, version bumped (captured as an update)."""
        if self.setup.effect == COUNTER:
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
        for conn in (self._pg, self._redis):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    # --- internals -------------------------------------------------------------------

    def conn(self) -> psycopg.Connection:
        """The client's PostgreSQL connection through `app->postgres` (reconnecting)."""
        if self._pg is None or self._pg.closed:
            try:
                self._pg = app_pg_connect(self.setup.pg_app)
            except psycopg.Error as exc:
                raise Outcome("fail", f"connect: {exc}".strip()[:300]) from exc
        return self._pg

    def _source(self, op: str, args: tuple[str | None, ...], statement: str) -> None:
        try:
            conn = self.conn()
            try:
                row = conn.execute(
                    sql.SQL(statement).format(table=self.setup.table), args
                ).fetchone()
            except psycopg.Error as exc:
                with contextlib.suppress(Exception):
                    conn.close()
                raise classify_pg(exc) from exc
        except Outcome as o:
            self.rec.complete(op, o.phase, error=str(o))
            return
        assert row is not None
        if self.setup.effect == COUNTER:
            self.rec.complete(op, "ok", value=row[0], version=int(row[1]))
        else:
            self.rec.complete(op, "ok", version=int(row[0]))

    def _read(self, key: str, store: str) -> ReadResult:
        if store == SOURCE_STORE:
            try:
                row = (
                    self.conn()
                    .execute(
                        sql.SQL("SELECT value, version FROM {} WHERE key = %s").format(
                            self.setup.source_table()
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
        if store != self.setup.store:
            raise ValueError(
                f"{self.setup.name} has no store {store!r}; use source or {self.setup.store}"
            )
        if self._redis is None:
            self._redis = redis_client(self.setup._redis_app)
        name = self.setup.prefix + key
        try:
            if self.setup.effect == COUNTER:
                total = self._redis.get(name)
                return ReadResult(total)
            h = self._redis.hgetall(name)
        except redis.RedisError as exc:
            raise Outcome("fail", str(exc)[:300]) from exc
        return ReadResult(h["value"], int(h["version"])) if "value" in h else ReadResult(None)
