"""Event sourcing on PostgreSQL: an append-only event log, commands validated against the
aggregate's replayed state, and projections folded from the log (claims C11, C12).

The log is `<namespace>.events(pos, aggregate, seq, delta, event_id)` with primary key
`(aggregate, seq)`: `seq` is the aggregate's version and `pos` the position in the
whole log. Each aggregate is an account whose balance is the sum of its deltas.

A command (the workload's `write` of a key) is a deposit or a withdrawal of a seeded
random amount: the client replays the aggregate's events (balance and version), checks
the invariant (`invariant`, e.g. `{"min": 0}`: no overdraft), works `gap_ms` (the
command handler's own time, the window of the race), then appends one event:

- `occ: true` (optimistic concurrency): the event's `seq` is the loaded version + 1,
  so a concurrent append of the same aggregate makes the insert a unique violation;
  the command reloads and revalidates (up to `retries` times, then fails). Validation
  always saw the state the event follows: the invariant holds (C12).
- `occ: false`: the event takes the next `seq` at append time, whatever was
  validated: two withdrawals validated against one balance both land (C12's race).

Appends take an EXCLUSIVE lock on the log table (readers are not blocked), which makes
`pos` order commit order: a projector tailing `pos > checkpoint` never skips an event
that commits late. The projector (`driftlab.scenarios.architectures.event_sourced.projector`, a
process named
`projector`, the target of crash faults) folds the log into `projection:balance` with
its checkpoint in the same transaction; at quiesce a fresh projector (`rebuild`)
replays the whole log from position 0 into `projection:rebuilt` (C11). With
`checkpoint: periodic` (a planted bug) the live projector saves its checkpoint apart
from the projection every `checkpoint_ms`: a crash re-applies events, and the live
projection no longer equals a replay (the rebuild, always atomic, still does). Snapshots are
not used: they would only be an optimization of the replay.

History: commands are `command` ops (value: the workload's unique value, `extra.delta`,
version: the appended `seq`; `fail` when validation refused or conflicts persisted);
the log's events are recorded at quiesce by reading the table back, one `produce` per
row on channel `events` (key: aggregate, value: delta, version: seq, offset: pos, time:
the row's commit time), so the history holds exactly what the log holds; projectors
record `deliver` and `apply` from their own segments.

Parameters: `occ` (default true), `invariant` (default `{"min": 0}`), `withdraw_p`
(probability that a command withdraws, default 0.6), `max_amount` (default 5),
`gap_ms` (default 0), `retries` (default 5), `poll_ms` (projector poll, default 50),
`checkpoint` (`atomic`, default, or `periodic`) and `checkpoint_ms` (default 500).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import psycopg
from psycopg import sql

from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.setups.base import Client, ReadResult, Setup, SetupContext
from driftlab.harness.lab.setups.connect import (
    app_pg_connect,
    direct_pg_connect,
    endpoint,
    pg_conninfo,
)
from driftlab.harness.lab.setups.worker_process import WorkerProcess

CHANNEL = "events"
LIVE, REBUILT = "projection:balance", "projection:rebuilt"
PROJECTOR, REBUILD = "projector", "rebuild"
AFTER_VALIDATE = "after-validate"
"""The step point of a command between its validation and its append."""
_TABLES = {LIVE: "projection_balance", REBUILT: "projection_rebuilt"}


class Rejected(Exception):
    """The command failed validation (or kept conflicting): nothing was appended."""


class EventSourced(Setup):
    """PostgreSQL event log, command clients, projector processes."""

    name = "event-sourced"
    services = ("postgres",)
    stores = (LIVE, REBUILT)

    def __init__(self) -> None:
        super().__init__()
        self.occ = True
        self.low: int | None = 0
        self.high: int | None = None
        self.withdraw_p = 0.6
        self.max_amount = 5
        self.gap = 0.0
        self.retries = 5
        self.pg_app = self.pg_direct = ""
        self.events = sql.Identifier("events")
        self.projectors: dict[str, WorkerProcess] = {}
        self._worker_config: dict[str, Any] = {}

    # -- lifecycle -----------------------------------------------------------------

    def prepare(self, ctx: SetupContext) -> None:
        """Create the log, projection and checkpoint tables under the run's schema."""
        self.ctx = ctx
        p = ctx.params
        self.occ = bool(p.get("occ", True))
        invariant = p.get("invariant", {"min": 0})
        if not isinstance(invariant, dict) or set(invariant) - {"min", "max"}:
            raise ValueError(
                f"event-sourced: invariant {invariant!r}; use e.g. {{'min': 0}} or {{'max': 10}}"
            )
        self.low, self.high = invariant.get("min"), invariant.get("max")
        self.withdraw_p = float(p.get("withdraw_p", 0.6))
        self.max_amount = int(p.get("max_amount", 5))
        self.gap = float(p.get("gap_ms", 0)) / 1000
        self.retries = int(p.get("retries", 5))
        if not 0 <= self.withdraw_p <= 1 or self.max_amount < 1 or self.retries < 0:
            raise ValueError(
                "event-sourced: withdraw_p must be in [0, 1], max_amount >= 1, retries >= 0"
            )
        schema = ctx.namespace
        self.events = sql.Identifier(schema, "events")
        self.pg_app = pg_conninfo(endpoint(ctx.stack, "postgres"))
        self.pg_direct = pg_conninfo(endpoint(ctx.stack, "postgres", direct=True))
        with direct_pg_connect(self.pg_direct) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (pos bigserial UNIQUE, aggregate text NOT NULL, "
                    "seq bigint NOT NULL, delta bigint NOT NULL, event_id text NOT NULL, "
                    "created timestamptz NOT NULL DEFAULT clock_timestamp(), "
                    "PRIMARY KEY (aggregate, seq))"
                ).format(self.events)
            )
            for table in _TABLES.values():
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE {} (aggregate text PRIMARY KEY, balance bigint NOT NULL, "
                        "seq bigint NOT NULL)"
                    ).format(sql.Identifier(schema, table))
                )
            conn.execute(
                sql.SQL("CREATE TABLE {} (projector text PRIMARY KEY, pos bigint NOT NULL)").format(
                    sql.Identifier(schema, "checkpoints")
                )
            )
        link = ctx.stack.link(PROJECTOR, "postgres")
        self._worker_config = {
            "conninfo": pg_conninfo(link),
            "schema": schema,
            "channel": CHANNEL,
            "batch": 200,
            "poll_ms": float(p.get("poll_ms", 50)),
        }
        checkpoint = p.get("checkpoint", "atomic")
        if checkpoint not in ("atomic", "periodic"):
            raise ValueError(f"event-sourced: checkpoint {checkpoint!r}; use atomic or periodic")
        self.projectors[PROJECTOR] = self._projector(
            PROJECTOR,
            LIVE,
            checkpoint=checkpoint,
            checkpoint_ms=float(p.get("checkpoint_ms", 500)),
        )

    def _projector(self, name: str, store: str, **options: Any) -> WorkerProcess:
        config = {**self._worker_config, "table": _TABLES[store], "store": store, **options}
        ctx = self.context
        return WorkerProcess(
            name,
            "driftlab.scenarios.architectures.event_sourced.projector",
            config,
            ctx.work_dir,
            ctx.logs,
        )

    def start(self) -> None:
        """Start the live projector."""
        live = self.projectors[PROJECTOR]
        live.start()
        live.wait_healthy()

    def process(self, name: str) -> WorkerProcess | None:
        """`projector`: the target of crash, pause and restart faults."""
        return self.projectors.get(name)

    def client(self, process: str) -> EventSourcedClient:
        """A command client with its own PostgreSQL connection."""
        return EventSourcedClient(self, process)

    def quiesce(self, timeout: float) -> bool:
        """Let the live projector reach the log's end, rebuild a projection from position
        0 with a fresh projector, then record the log's events as `produce` events."""
        deadline = time.monotonic() + timeout
        end = self._log_end()
        if not self._wait_for(self.projectors[PROJECTOR], end, deadline):
            return False
        rebuild = self._projector(REBUILD, REBUILT)
        self.projectors[REBUILD] = rebuild
        rebuild.start()
        try:
            rebuild.wait_healthy(max(1.0, deadline - time.monotonic()))
            if not self._wait_for(rebuild, end, deadline):
                return False
        finally:
            rebuild.stop()
        rec = self.context.recorder
        for name in (PROJECTOR, REBUILD):
            rec.mark("consumer-done", consumer=name, channel=CHANNEL)
        self._record_log()
        return True

    def final_states(self) -> dict[str, dict[str, tuple[str, int | None]]]:
        """Both projections: aggregate -> (balance, seq of the last event folded)."""
        states: dict[str, dict[str, tuple[str, int | None]]] = {}
        with direct_pg_connect(self.pg_direct) as conn:
            for store, table in _TABLES.items():
                rows = conn.execute(
                    sql.SQL("SELECT aggregate, balance, seq FROM {}").format(
                        sql.Identifier(self.context.namespace, table)
                    )
                ).fetchall()
                states[store] = {a: (str(b), int(s)) for a, b, s in rows}
        return states

    def teardown(self) -> None:
        """Stop the projectors."""
        for p in self.projectors.values():
            p.stop()

    # -- internals -----------------------------------------------------------------

    def _log_end(self) -> int:
        with direct_pg_connect(self.pg_direct) as conn:
            row = conn.execute(sql.SQL("SELECT coalesce(max(pos), 0) FROM {}").format(self.events))
            return int(row.fetchone()[0])  # type: ignore[index]

    @staticmethod
    def _wait_for(projector: WorkerProcess, end: int, deadline: float) -> bool:
        def at_end() -> bool:
            return projector.is_running() and projector.status().get("pos", -1) >= end

        return bool(wait_until(at_end, deadline - time.monotonic()))

    def _record_log(self) -> None:
        """One `produce` per event the log holds: the history's copy of the log."""
        rec = self.context.recorder
        with direct_pg_connect(self.pg_direct) as conn:
            rows = conn.execute(
                sql.SQL(
                    "SELECT pos, aggregate, seq, delta, event_id, "
                    "(extract(epoch FROM created) * 1e6)::bigint FROM {} ORDER BY pos"
                ).format(self.events)
            ).fetchall()
        for pos, aggregate, seq, delta, event_id, micros in rows:
            rec.msg(
                "produce",
                channel=CHANNEL,
                partition=0,
                offset=int(pos),
                msg_id=event_id,
                key=aggregate,
                value=str(delta),
                version=int(seq),
                time=int(micros) * 1000,
            )

    def allows(self, balance: int) -> bool:
        """Whether a balance keeps the invariant."""
        return (self.low is None or balance >= self.low) and (
            self.high is None or balance <= self.high
        )


class EventSourcedClient(Client):
    """An application instance handling commands: load, validate, append."""

    def __init__(self, setup: EventSourced, process: str) -> None:
        super().__init__(setup.context.recorder, process)
        self.setup = setup
        self.rng = setup.context.client_rng(process)
        self._pg: psycopg.Connection | None = None

    def write(self, key: str, value: str) -> None:
        """Handle one command on aggregate `key`: a deposit or a withdrawal."""
        s = self.setup
        amount = self.rng.randint(1, s.max_amount)
        delta = -amount if self.rng.random() < s.withdraw_p else amount
        self.command(key, delta, value)

    def command(self, key: str, delta: int, value: str) -> None:
        """Add `delta` to aggregate `key` (event id `value`) if the invariant allows it.

        The command stops at the step point `after-validate` between its validation
        and its append: the window of C12's race, where a replay holds it.
        """
        op = self.rec.invoke(
            self.process, "command", key=key, value=value, store=CHANNEL, extra={"delta": delta}
        )
        try:
            seq = self._handle(key, delta, value)
        except Rejected as exc:
            self.rec.complete(op, "fail", error=str(exc))
            return
        except psycopg.OperationalError as exc:
            self._drop()
            self.rec.complete(op, "info", error=str(exc).strip()[:300])
            return
        except psycopg.Error as exc:
            self._drop()
            self.rec.complete(op, "fail", error=str(exc).strip()[:300])
            return
        self.rec.complete(op, "ok", version=seq)

    def _handle(self, key: str, delta: int, value: str) -> int:
        s = self.setup
        conn = self._conn()
        for _ in range(s.retries + 1):
            balance, version = self._load(conn, key)
            if not s.allows(balance + delta):
                raise Rejected(f"rejected: {key} at {balance} cannot take {delta:+d}")
            if s.gap:
                time.sleep(self.rng.uniform(0, s.gap))
            s.context.steps.reach(AFTER_VALIDATE, self.process, key)
            try:
                return self._append(conn, key, version, delta, value)
            except psycopg.errors.UniqueViolation:
                continue  # another command appended first: reload and revalidate
        raise Rejected(f"conflict: {key} changed under {s.retries + 1} attempts")

    def _load(self, conn: psycopg.Connection, key: str) -> tuple[int, int]:
        """The aggregate's state by replaying its events: (balance, version)."""
        row = conn.execute(
            sql.SQL(
                "SELECT coalesce(sum(delta), 0), coalesce(max(seq), 0) FROM {} WHERE aggregate = %s"
            ).format(self.setup.events),
            (key,),
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def _append(
        self, conn: psycopg.Connection, key: str, version: int, delta: int, value: str
    ) -> int:
        events = self.setup.events
        with conn.transaction():
            conn.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(events))
            if self.setup.occ:
                seq_expr = sql.SQL("%(expected)s + 1")
            else:
                # Blind append: the next version now, not the one validated against.
                seq_expr = sql.SQL(
                    "(SELECT coalesce(max(seq), 0) + 1 FROM {} WHERE aggregate = %(key)s)"
                ).format(events)
            row = conn.execute(
                sql.SQL(
                    "INSERT INTO {} (aggregate, seq, delta, event_id) "
                    "VALUES (%(key)s, {}, %(delta)s, %(id)s) RETURNING seq"
                ).format(events, seq_expr),
                {"key": key, "expected": version, "delta": delta, "id": value},
            ).fetchone()
        assert row is not None
        return int(row[0])

    def read(self, key: str, store: str) -> None:
        """Read an aggregate's balance from a projection."""
        if store not in _TABLES:
            raise ValueError(f"event-sourced has no store {store!r}; use {', '.join(_TABLES)}")
        op = self.rec.invoke(self.process, "read", key=key, store=store)
        try:
            result = self._read(key, store)
        except psycopg.Error as exc:
            self._drop()
            self.rec.complete(op, "fail", error=str(exc).strip()[:300])
            return
        self.rec.complete(op, "ok", value=result.value, version=result.version)

    def _read(self, key: str, store: str) -> ReadResult:
        row = (
            self._conn()
            .execute(
                sql.SQL("SELECT balance, seq FROM {} WHERE aggregate = %s").format(
                    sql.Identifier(self.setup.context.namespace, _TABLES[store])
                ),
                (key,),
            )
            .fetchone()
        )
        return ReadResult(str(row[0]), int(row[1])) if row else ReadResult(None)

    def delete(self, key: str) -> None:
        """An event log is append-only: there is no delete."""
        raise ValueError("event-sourced: the log is append-only; the mix must not contain deletes")

    def close(self) -> None:
        """Close the connection, ignoring errors."""
        self._drop()

    def _conn(self) -> psycopg.Connection:
        if self._pg is None or self._pg.closed:
            self._pg = app_pg_connect(self.setup.pg_app)
        return self._pg

    def _drop(self) -> None:
        if self._pg is not None:
            with contextlib.suppress(Exception):
                self._pg.close()
        self._pg = None
