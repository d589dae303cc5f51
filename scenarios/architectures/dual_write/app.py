"""One dual-write application instance, an OS process of its own.

    python -m driftlab.scenarios.architectures.dual_write.app   # started by setup.py

The instance holds its PostgreSQL and Redis connections and makes every call of the
application to them; the client thread of the harness drives it one request at a time
(one JSON line on stdin, one JSON line of answer on stdout) and records the history.
So the nemesis's `app-crash` is a SIGKILL of this process between the source write and
the derived writes: the pending writes and the connections die with it, as they do
when an application crashes. The search index is embedded in the harness (it stands
for a search service), so its writes stay in the client thread.

Requests (`do`): `source-write` (key, value: None is a tombstone) answers `version`;
`cache-write` (key, value, version) answers {}; `read` (store `source` or `cache`, key)
answers `value` and `version`. A failed call answers `phase` (`fail` or `info`, see
`Outcome`) and `error`. The process exits when stdin closes, also when the harness
dies, so no instance outlives its run.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import redis
from psycopg import sql

from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.setups.app_process import APP_CONFIG_ENV, serve
from driftlab.harness.lab.setups.connect import redis_client
from driftlab.harness.lab.setups.stores import UPSERT, AppConnection, Outcome, classify_redis
from driftlab.scenarios.architectures.dual_write.setup import CACHE


class App:
    """The store calls of one instance, on connections it opens when first needed."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.conninfo: str = cfg["pg"]
        self.table = sql.Identifier(*cfg["table"])
        self.prefix: str = cfg["prefix"]
        self.pg = AppConnection(self.conninfo)
        r = cfg.get("redis")
        self.redis = None if r is None else redis_client(Endpoint(r["host"], r["port"], r["extra"]))

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one request; a failed store call raises its Outcome (`serve` answers it)."""
        if request["do"] == "source-write":
            return {"version": self.source_write(request["key"], request["value"])}
        if request["do"] == "cache-write":
            self.cache_write(request["key"], request["value"], request["version"])
            return {}
        value, version = self.read(request["store"], request["key"])
        return {"value": value, "version": version}

    def source_write(self, key: str, value: str | None) -> int:
        """Upsert (or tombstone) `key`, returning the source's new version."""
        row = self._pg_execute(sql.SQL(UPSERT).format(table=self.table), (key, value))
        assert row is not None
        return int(row[0])

    def cache_write(self, key: str, value: str | None, version: int | None) -> None:
        """Set (or delete, `value` None) the key's hash in the cache."""
        assert self.redis is not None
        name = self.prefix + key
        try:
            if value is None:
                self.redis.delete(name)
            else:
                self.redis.hset(name, mapping={"value": value, "version": version or 0})
        except redis.RedisError as exc:
            raise classify_redis(exc) from exc

    def read(self, store: str, key: str) -> tuple[str | None, int | None]:
        """The key's value and version in the source or the cache (None: absent)."""
        if store == SOURCE_STORE:
            row = self._pg_execute(
                sql.SQL("SELECT value, version FROM {} WHERE key = %s").format(self.table),
                (key,),
            )
            if row is None:
                return None, None
            return row[0], int(row[1])
        if store == CACHE and self.redis is not None:
            try:
                h = self.redis.hgetall(self.prefix + key)
            except redis.RedisError as exc:
                raise classify_redis(exc) from exc
            return (h["value"], int(h["version"])) if h else (None, None)
        raise Outcome("fail", f"the application instance does not read {store!r}")

    def _pg_execute(self, query: sql.Composed, params: tuple[Any, ...]) -> Any:
        with self.pg.failing() as conn:
            return conn.execute(query, params).fetchone()


def main() -> int:
    """Serve the dual-write application's requests until stdin closes."""
    return serve(App(json.loads(os.environ[APP_CONFIG_ENV])).handle)


if __name__ == "__main__":
    sys.exit(main())
