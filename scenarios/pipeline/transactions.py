"""The transactions of a pipeline file, run on the source, and the views of its stores.

A transaction takes a per-key advisory lock first, runs its template's statements
(the placeholders as SQL parameters), counts the key's new version, evaluates every
view store's view of the key, and commits. Transactions on one key are therefore
serialized and a view's state is read in the transaction that made it: the states the
history records are exactly the committed ones, in commit order (docs/history.md).

The version counter lives in a schema of its own, `<namespace>_driftlab`, beside the
source's, so a consumer that captures the source's schema whole never sees it.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql

from driftlab.harness.history.canonical import canonical_json
from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.lab.setups.base import Recorder
from driftlab.harness.lab.setups.connect import direct_pg_connect
from driftlab.harness.lab.setups.stores import AppConnection, Outcome, State, TimedConnection
from driftlab.scenarios.pipeline import links
from driftlab.scenarios.pipeline.checks import one_line
from driftlab.scenarios.pipeline.spec_fields import PipelineError
from driftlab.scenarios.pipeline.spec_model import TXN_FIELDS, SqlSource, TxnTemplate
from driftlab.scenarios.pipeline.spec_sections import StoreSpec

CUSTOMERS = 5
"""`{customer}` is one of c0..c4: few enough that customers share orders."""

LOCK = b"SELECT pg_advisory_xact_lock(hashtextextended(%(key)s, 37))"
VIEW_STATE = "view-state"
"""The `extra.step` of a view state's op (docs/history.md)."""


def versions_table(namespace: str) -> sql.Identifier:
    """The table counting each entity key's committed transactions."""
    return sql.Identifier(f"{namespace}_driftlab", "versions")


def create_versions(conninfo: str, namespace: str) -> None:
    """Create the version counter's schema and table (as the run's owner)."""
    table = versions_table(namespace)
    with direct_pg_connect(conninfo) as conn:
        conn.execute(
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                sql.Identifier(f"{namespace}_driftlab")
            )
        )
        conn.execute(
            sql.SQL("CREATE TABLE {} (key text PRIMARY KEY, version bigint NOT NULL)").format(table)
        )


def create_tables(conninfo: str, namespace: str, tables: dict[str, str]) -> None:
    """Create the file's `[source.tables]` in the run's schema."""
    with direct_pg_connect(conninfo) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(namespace)))
        for name, columns in tables.items():
            # The columns are the file's own SQL, as `create` is.
            conn.execute(
                sql.SQL("CREATE TABLE {} (")
                .format(sql.Identifier(namespace, name))
                .as_string(None)
                .encode()
                + columns.encode()
                + b")"
            )


def draw(rng: random.Random) -> dict[str, Any]:
    """The random placeholders of one transaction."""
    return {
        "customer": f"c{rng.randrange(CUSTOMERS)}",
        "amount": Decimal(rng.randrange(100, 100_000)) / 100,
        "lines": rng.randint(1, 5),
        "line": rng.randint(1, 5),
    }


def _as_params(text: str, values: dict[str, Any]) -> bytes:
    """A statement of the file as psycopg SQL: each placeholder of TXN_FIELDS a named
    parameter, the run's templates filled."""
    return links.fill(
        text.replace("%", "%%"), {**values, **{n: f"%({n})s" for n in TXN_FIELDS}}
    ).encode()


def _shown(text: str, values: dict[str, Any], params: dict[str, Any]) -> str:
    """A statement with its parameters written in, for the report."""
    literals = {n: sql.Literal(params.get(n)).as_string(None) for n in TXN_FIELDS}
    return links.fill(text, {**values, **literals})


@dataclass(frozen=True)
class View:
    """One view store's view: the query of one key's state."""

    store: str
    query: bytes
    compare: tuple[str, ...] | None

    def state(self, pg: TimedConnection, key: str) -> str | None:
        """The canonical state of `key`'s view (None: no row, the key absent)."""
        row = pg.execute(self.query, {"key": key}).fetchone()
        if row is None or row[0] is None:
            return None
        return canonical_json(row[0], self.compare)

    def key(self, entity: str) -> str:
        """The history's key of `entity` in this view: `<store>/<entity>`."""
        return f"{self.store}/{entity}"


def views(stores: Iterable[StoreSpec], values: dict[str, Any]) -> tuple[View, ...]:
    """The views of the file's view stores, their run templates filled."""
    return tuple(
        View(s.name, _as_params(s.view, values), s.compare)
        for s in stores
        if s.kind == "view" and s.view is not None
    )


@dataclass
class Committed:
    """A transaction's outcome: its phase, the key's version on `ok`, and each view's
    state (store -> canonical JSON, None: absent) where it was evaluated."""

    phase: str
    version: int | None
    states: dict[str, str | None]


class Transactions:
    """The file's transaction templates, chosen by weight and run with their views."""

    def __init__(
        self,
        source: SqlSource,
        stores: Iterable[StoreSpec],
        namespace: str,
        values: dict[str, Any],
    ) -> None:
        self.templates: tuple[TxnTemplate, ...] = source.transactions
        self.values = values
        self.statements = [[_as_params(s, values) for s in t.statements] for t in self.templates]
        self.cum = list(itertools.accumulate(t.weight for t in self.templates))
        self.views = views(stores, values)
        self.bump = (
            sql.SQL(
                "INSERT INTO {t} AS v (key, version) VALUES (%(key)s, 1) ON CONFLICT (key) "
                "DO UPDATE SET version = v.version + 1 RETURNING version"
            )
            .format(t=versions_table(namespace))
            .as_string(None)
            .encode()
        )

    def choose(self, rng: random.Random) -> int:
        """The index of a template, drawn by weight."""
        x = rng.random() * self.cum[-1]
        return min(bisect.bisect_left(self.cum, x), len(self.templates) - 1)

    def run(
        self,
        rec: Recorder,
        process: str,
        conn: AppConnection,
        key: str,
        value: str,
        rng: random.Random,
    ) -> Committed:
        """Run one transaction on `key` through `conn`, recorded in `rec` as a `txn` op
        and one view-state op per view store."""
        i = self.choose(rng)
        template = self.templates[i]
        params = {"key": key, "value": value, **draw(rng)}
        shown = [_shown(s, self.values, params) for s in template.statements]
        txn = rec.invoke(
            process,
            "txn",
            key=key,
            value=value,
            store=SOURCE_STORE,
            extra={"name": template.name, "statements": shown},
        )
        steps: dict[str, str] = {}  # store -> its view state's op id
        states: dict[str, str | None] = {}
        phase, version, error = "ok", None, None
        try:
            with conn.failing() as pg:
                pg.execute(b"BEGIN")
                pg.execute(LOCK, {"key": key})
                for statement in self.statements[i]:
                    pg.execute(statement, params)
                row = pg.execute(self.bump, {"key": key}).fetchone()
                for view in self.views:
                    states[view.store] = view.state(pg, key)
        except Outcome as out:  # nothing was committed: the connection is closed
            phase, error = "fail", str(out)
        if phase == "ok":
            for view in self.views:
                steps[view.store] = self._invoke_state(rec, process, view, key, states, txn)
            try:
                with conn.failing() as pg:
                    pg.execute(b"COMMIT")
                version = int(row[0]) if row else None
            except Outcome as out:
                phase, error = out.phase, str(out)
        for op_id in steps.values():
            rec.complete(op_id, phase, version=version, error=error)
        rec.complete(txn, phase, version=version, error=error)
        return Committed(phase, version, states if phase == "ok" else {})

    def _invoke_state(
        self,
        rec: Recorder,
        process: str,
        view: View,
        key: str,
        states: dict[str, str | None],
        txn: str,
    ) -> str:
        state = states[view.store]
        return rec.invoke(
            process,
            "write" if state is not None else "delete",
            key=view.key(key),
            value=state,
            store=SOURCE_STORE,
            extra={"step": VIEW_STATE, "txn": txn},
        )

    def run_script(
        self,
        rec: Recorder,
        process: str,
        conninfo: str,
        script: str,
        keys_query: str | None,
        default_keys: list[str],
    ) -> dict[str, Committed]:
        """Run the seed script `script` (templates filled) in one transaction that also
        evaluates every view of the keys `keys_query` returns (None: `default_keys`),
        recorded as one `txn` op named `seed`; each key's outcome."""
        txn = rec.invoke(
            process, "txn", store=SOURCE_STORE, extra={"name": "seed", "statements": [script]}
        )
        out: dict[str, Committed] = {}
        steps: list[str] = []
        with direct_pg_connect(conninfo) as pg:
            pg.execute(b"BEGIN")
            pg.execute(script.encode())
            keys = (
                [str(r[0]) for r in pg.execute(keys_query.encode()).fetchall()]
                if keys_query is not None
                else default_keys
            )
            for key in keys:
                row = pg.execute(self.bump, {"key": key}).fetchone()
                states = {v.store: v.state(pg, key) for v in self.views}
                out[key] = Committed("ok", int(row[0]) if row else None, states)
                steps += [self._invoke_state(rec, process, v, key, states, txn) for v in self.views]
            pg.execute(b"COMMIT")
        versions = [c.version for c in out.values() for _ in self.views]
        for op_id, version in zip(steps, versions, strict=True):
            rec.complete(op_id, "ok", version=version)
        rec.complete(txn, "ok")
        return out


class ViewsReader:
    """The source as the view stores must show it: every view of every known key,
    evaluated in one snapshot, as `<store>/<key> -> (canonical JSON, None)`."""

    def __init__(
        self, conninfo: str, views_: tuple[View, ...], keys: Callable[[], Iterable[str]]
    ) -> None:
        self.conninfo = conninfo
        self.views = views_
        self.keys = keys
        self._conn = direct_pg_connect(conninfo)

    def read_all(self) -> State:
        """Each view of each known key; a view with no row is an absent key."""
        if self._conn.closed:
            self._conn = direct_pg_connect(self.conninfo)
        out: State = {}
        pg = self._conn
        pg.execute(b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            for key in sorted(set(self.keys())):
                for view in self.views:
                    state = view.state(pg, key)
                    if state is not None:
                        out[view.key(key)] = (state, None)
        finally:
            pg.execute(b"COMMIT")
        return out

    def close(self) -> None:
        self._conn.close()


class ViewStore:
    """A view store's reader: the store's own reader with its keys `<store>/<key>` and
    its values canonical JSON (projected to `compare`)."""

    def __init__(self, inner: Any, store: str, compare: tuple[str, ...] | None) -> None:
        self.inner = inner
        self.store = store
        self.compare = compare

    def read_all(self) -> State:
        """What the store holds, keyed and written as the view's states are."""
        return {
            f"{self.store}/{k}": (canonical_json(v, self.compare), version)
            for k, (v, version) in self.inner.read_all().items()
        }

    def close(self) -> None:
        self.inner.close()


def check(txns: Transactions, conninfo: str) -> None:
    """Run each template and each view once, in a transaction rolled back;
    PipelineError naming the template or the store when PostgreSQL refuses it."""
    try:
        conn = psycopg.connect(conninfo, connect_timeout=5)
    except psycopg.OperationalError:
        return  # the link or the server: the run finds and names that itself
    params = {"key": "driftlab-check", "value": "check", **draw(random.Random(0))}
    try:
        for i, template in enumerate(txns.templates):
            field = f"source.transactions[{i}] ({template.name})"
            for statement in txns.statements[i]:
                _try(conn, field, statement, params, TXN_FIX)
        for view in txns.views:
            field = f"stores.{view.store}.view"
            _try(conn, field, view.query, {"key": "driftlab-check"}, VIEW_FIX)
    finally:
        conn.rollback()
        conn.close()


TXN_FIX = (
    "fix the statement ({key}, {value}, {customer} are text parameters, {amount} a "
    "numeric, {lines} and {line} integers)"
)
VIEW_FIX = "fix the query: one row of one column for the key {key} (a text parameter), or none"


def _try(conn: psycopg.Connection[Any], field: str, text: bytes, params: Any, fix: str) -> None:
    try:
        with conn.transaction():
            conn.execute(text, params)
    except psycopg.OperationalError:
        return
    except psycopg.Error as exc:
        raise PipelineError(f"{field}: fails on PostgreSQL: {one_line(exc)}; {fix}") from None
