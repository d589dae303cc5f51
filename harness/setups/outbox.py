"""The transactional outbox: the business row and an outbox row in one PostgreSQL
transaction; Debezium captures the outbox table only; a consumer applies its events.

    client: BEGIN; upsert <ns>.items; [step point]; INSERT <ns>.outbox; COMMIT
    Debezium (outbox table only) -> Kafka dbz_<ns>.<ns>.outbox -> consumer -> Redis cache

The two writes commit or roll back together, so the crash point that splits a dual
write (`after-source-write`, claim C2) here kills the transaction: nothing of it reaches
either table, and the derived store follows the one order the database committed
(claim C14). Everything else (consumer processes, links, audit, quiesce, faults on
`consumer` and `consumer->redis`) is the CDC setup's (harness.setups.cdc), with the same
parameters; the effect is always `versioned`, and an event's `msg_id` is its outbox id
(`event-<id>`).

An application crash at the step point records the write as `info` (the process died
with its transaction open: PostgreSQL rolls it back when the connection drops, but
the application cannot know), then the workload restarts the client.
"""

from __future__ import annotations

import contextlib

import psycopg
from psycopg import sql

from harness.history.schema import SOURCE_STORE
from harness.setups.base import AppCrash, SetupContext
from harness.setups.cdc import Cdc, CdcClient
from harness.setups.cdc_consumer import VERSIONED
from harness.setups.connect import direct_pg_connect
from harness.setups.dual_write import _UPSERT, AFTER_SOURCE_WRITE, Outcome, _classify_pg

_OUTBOX_INSERT = "INSERT INTO {outbox} (key, value, version) VALUES (%s, %s, %s)"


class Outbox(Cdc):
    """Business table + outbox table in one transaction; CDC on the outbox only."""

    name = "outbox"
    table_name = "outbox"
    id_field = "id"

    def prepare(self, ctx: SetupContext) -> None:
        """As the CDC setup, with the effect fixed to `versioned`."""
        if ctx.params.get("effect", VERSIONED) != VERSIONED:
            raise ValueError("outbox: the consumer's effect is versioned; drop `effect`")
        super().prepare(ctx)

    def create_tables(self) -> None:
        """`items` (the business table, the source) and `outbox` (what Debezium reads)."""
        ns = self.context.namespace
        with direct_pg_connect(self.pg_direct) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(ns)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (key text PRIMARY KEY, value text, version bigint NOT NULL)"
                ).format(self.source_table())
            )
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (id bigserial PRIMARY KEY, key text NOT NULL, value text, "
                    "version bigint NOT NULL)"
                ).format(self.table)
            )

    def source_table(self) -> sql.Identifier:
        """The business table."""
        return sql.Identifier(self.context.namespace, "items")

    def client(self, process: str) -> OutboxClient:
        """A client writing both tables in one transaction."""
        return OutboxClient(self, process)


class OutboxClient(CdcClient):
    """One application instance of the outbox setup."""

    setup: Outbox

    def write(self, key: str, value: str) -> None:
        """Upsert the business row and append its outbox event, in one transaction."""
        op = self.rec.invoke(self.process, "write", key=key, value=value, store=SOURCE_STORE)
        self._transaction(op, key, value)

    def delete(self, key: str) -> None:
        """A tombstone business row and its outbox event (value null), in one transaction."""
        op = self.rec.invoke(self.process, "delete", key=key, store=SOURCE_STORE)
        self._transaction(op, key, None)

    def _transaction(self, op: str, key: str, value: str | None) -> None:
        setup = self.setup
        try:
            conn = self.conn()
            try:
                conn.execute("BEGIN")
                row = conn.execute(
                    sql.SQL(_UPSERT).format(table=setup.source_table()), (key, value)
                ).fetchone()
                assert row is not None
                version = int(row[0])
                setup.context.steps.reach(AFTER_SOURCE_WRITE, self.process, key)
                conn.execute(
                    sql.SQL(_OUTBOX_INSERT).format(outbox=setup.table), (key, value, version)
                )
                conn.execute("COMMIT")
            except AppCrash:
                # The process dies with its transaction open: no ROLLBACK is sent, the
                # server rolls back when the connection drops, the application never
                # learns the outcome.
                with contextlib.suppress(Exception):
                    conn.close()
                self.rec.complete(op, "info", error="application crashed mid-transaction")
                raise
            except psycopg.Error as exc:
                with contextlib.suppress(Exception):
                    conn.close()
                raise _classify_pg(exc) from exc
        except Outcome as o:
            self.rec.complete(op, o.phase, error=str(o))
            return
        self.rec.complete(op, "ok", version=version)
