"""A user's own setup: cache-aside over PostgreSQL and Redis.

The application writes PostgreSQL, then deletes the key from the Redis cache. A read
tries the cache; on a miss it reads PostgreSQL and fills the cache with what it read.
Nothing orders a fill against a write: a reader that read the old row before a write
can fill the cache *after* that write's delete, and the cache keeps the old value until
the key is written again (the well-known cache-aside race).

This file uses only driftlab's public pieces: the `Setup` / `Client` interface, the
recorder every operation writes to, and the stack's links (so faults can cut them).
"""

from __future__ import annotations

import contextlib
import time

import psycopg
from psycopg import sql

from driftlab import Client, Setup, SetupContext
from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.lab.setups.connect import endpoint, pg_conninfo, redis_client
from driftlab.scenarios.catalogue.architectures import register_setup

CACHE = "cache"


@register_setup
class CacheAside(Setup):
    """PostgreSQL rows, a Redis cache filled on read misses and invalidated on write."""

    name = "cache-aside"
    services = ("postgres", "redis")
    stores = (CACHE,)

    def prepare(self, ctx: SetupContext) -> None:
        """Create the run's table; `fill_delay_ms` is the reader's work before it fills."""
        self.ctx = ctx
        self.fill_delay = float(ctx.params.get("fill_delay_ms", 5)) / 1000
        self.table = sql.Identifier(ctx.namespace, "items")
        self.prefix = f"{ctx.namespace}:"
        self.pg = pg_conninfo(endpoint(ctx.stack, "postgres"))
        self.redis_app = endpoint(ctx.stack, "redis")
        self.pg_direct = pg_conninfo(endpoint(ctx.stack, "postgres", direct=True))
        self.redis_direct = endpoint(ctx.stack, "redis", direct=True)
        with psycopg.connect(self.pg_direct, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(ctx.namespace)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (key text PRIMARY KEY, value text, version bigint)"
                ).format(self.table)
            )

    def client(self, process: str) -> Client:
        """One application instance."""
        return CacheAsideClient(self, process)

    def final_states(self) -> dict[str, dict[str, tuple[str, int | None]]]:
        """Every row of the table, every key of the cache."""
        with psycopg.connect(self.pg_direct, autocommit=True) as conn:
            rows = conn.execute(sql.SQL("SELECT key, value, version FROM {}").format(self.table))
            source = {k: (v, ver) for k, v, ver in rows.fetchall()}
        r = redis_client(self.redis_direct)
        cache = {}
        for name in r.scan_iter(match=f"{self.prefix}*"):
            h = r.hgetall(name)
            if h:
                cache[name[len(self.prefix) :]] = (h["value"], int(h["version"]))
        r.close()
        return {SOURCE_STORE: source, CACHE: cache}


class CacheAsideClient(Client):
    """Writes go to PostgreSQL then invalidate; reads go through the cache."""

    def __init__(self, setup: CacheAside, process: str) -> None:
        super().__init__(setup.context.recorder, process)
        self.setup = setup
        self.rng = setup.context.client_rng(process)
        self.db = psycopg.connect(setup.pg, autocommit=True)
        self.cache = redis_client(setup.redis_app)

    def write(self, key: str, value: str) -> None:
        """Upsert the row (its version goes up by one), then delete the cached copy."""
        op = self.rec.invoke(self.process, "write", key=key, value=value, store=SOURCE_STORE)
        row = self.db.execute(
            sql.SQL(
                "INSERT INTO {} AS t VALUES (%s, %s, 1) ON CONFLICT (key) "
                "DO UPDATE SET value = EXCLUDED.value, version = t.version + 1 RETURNING version"
            ).format(self.setup.table),
            (key, value),
        ).fetchone()
        self.rec.complete(op, "ok", version=row[0])
        op = self.rec.invoke(self.process, "invalidate", key=key, store=CACHE)
        self.cache.delete(self.setup.prefix + key)
        self.rec.complete(op, "ok")

    def read(self, key: str, store: str) -> None:
        """Read through the cache: a miss reads the row and fills the cache with it."""
        op = self.rec.invoke(self.process, "read", key=key, store=store)
        cached = self.cache.hgetall(self.setup.prefix + key)
        if cached:
            self.rec.complete(op, "ok", value=cached["value"], version=int(cached["version"]))
            return
        row = self.db.execute(
            sql.SQL("SELECT value, version FROM {} WHERE key = %s").format(self.setup.table),
            (key,),
        ).fetchone()
        if row is None:
            self.rec.complete(op, "ok")
            return
        value, version = row
        time.sleep(self.rng.uniform(0, self.setup.fill_delay))  # rendering the entry
        fill = self.rec.invoke(self.process, "write", key=key, value=value, store=CACHE)
        self.cache.hset(self.setup.prefix + key, mapping={"value": value, "version": version})
        self.rec.complete(fill, "ok", version=version)
        self.rec.complete(op, "ok", value=value, version=version)

    def delete(self, key: str) -> None:
        """Not used by this example's workload."""
        raise ValueError("cache-aside example: the workload's mix has no deletes")

    def close(self) -> None:
        """Close both connections."""
        with contextlib.suppress(Exception):
            self.db.close()
        with contextlib.suppress(Exception):
            self.cache.close()
