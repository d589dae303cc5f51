"""Where a setup that captures its source table keeps its data, and how each party
reaches it: the one value the CDC-family setups (cdc, outbox, snapshot-stream,
compacted-log) and their clients share.

The application reaches PostgreSQL and Redis through its `app->` links (faults act on
them); the harness's own reads (set-up, audit, final states) go direct.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.setups.base import SetupContext
from driftlab.harness.lab.setups.connect import (
    direct_pg_connect,
    endpoint,
    pg_conninfo,
    redis_client,
)
from driftlab.harness.lab.setups.stores import State, create_source_table, redis_hashes, source_rows

CDC_SERVICES = ("postgres", "redis", "kafka", "connect")
"""The stack services a setup wired this way runs on: its source, its derived store,
the log, and Connect, whose Debezium captures the source."""


@dataclass(frozen=True, slots=True)
class Wiring:
    """The run's source table, its derived Redis store, and the addresses of both and
    of Kafka. `counter`: the derived store holds counters, not `(value, version)` hashes."""

    setup: str
    namespace: str
    store: str
    prefix: str
    pg_app: str
    pg_direct: str
    redis_app: Endpoint
    redis_direct: Endpoint
    kafka_direct: dict[str, Any]  # the lab's client config for the nodes themselves
    counter: bool = False

    @classmethod
    def of(cls, setup: str, ctx: SetupContext, store: str, *, counter: bool = False) -> Wiring:
        """The wiring of `setup` on the context's stack: source `<namespace>.items`, the
        derived store `store` under the Redis prefix `<namespace>:<store>:`."""
        stack, ns = ctx.stack, ctx.namespace
        return cls(
            setup=setup,
            namespace=ns,
            store=store,
            prefix=f"{ns}:{store}:",
            pg_app=pg_conninfo(endpoint(stack, "postgres")),
            pg_direct=pg_conninfo(endpoint(stack, "postgres", direct=True)),
            redis_app=endpoint(stack, "redis"),
            redis_direct=endpoint(stack, "redis", direct=True),
            kafka_direct=kafka_client_config(stack),
            counter=counter,
        )

    @property
    def source(self) -> sql.Identifier:
        """The source table, `<namespace>.items`."""
        return sql.Identifier(self.namespace, "items")

    def table(self, name: str) -> sql.Identifier:
        """Another table of the run, `<namespace>.<name>`."""
        return sql.Identifier(self.namespace, name)

    def create_source(self) -> None:
        """The source table: a per-key `version` bumped by every write."""
        create_source_table(self.pg_direct, self.namespace)

    def final_versions(self) -> dict[str, int]:
        """Each key's version in the source now (tombstones included)."""
        with direct_pg_connect(self.pg_direct) as conn:
            rows = conn.execute(
                sql.SQL("SELECT key, version FROM {}").format(self.source)
            ).fetchall()
        return {k: int(v) for k, v in rows}

    def final_states(self) -> dict[str, State]:
        """The source's live rows and the derived store's keys."""
        if not self.counter:
            derived = redis_hashes(self.redis_direct, self.prefix)
        else:
            r = redis_client(self.redis_direct, timeout=5.0)
            try:
                derived = {
                    full[len(self.prefix) :]: (r.get(full), None)
                    for full in r.scan_iter(match=f"{self.prefix}*", count=500)
                }
            finally:
                r.close()
        return {SOURCE_STORE: source_rows(self.pg_direct, self.source), self.store: derived}
