"""The transactional parts of a pipeline file: `[source] tables`, `seed`,
`[[source.transactions]]`, and a view store's `view` and `compare`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.pipeline.spec_fields import (
    NAME_PATTERN,
    check_template,
    only_fields,
    spec_error,
    str_field,
    template_names,
)
from harness.pipeline.spec_model import TXN_FIELDS, Seed, StoreSpec, TxnTemplate

SQL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""A table name usable unquoted in the file's SQL (`{source.schema}.orders`)."""

OWN_WRITES = ("write", "delete", "read", "http", "http_delete")
"""`[source]` fields that say how a key-value source is written: not with transactions."""


def parse_tables(src: dict[str, Any]) -> dict[str, str]:
    """`tables = { orders = "id text PRIMARY KEY, ..." }`: each name and its columns."""
    tables = src.get("tables", {})
    if not isinstance(tables, dict):
        raise spec_error(
            "source.tables", "is not a table", 'write tables = { orders = "id text PRIMARY KEY" }'
        )
    for name, columns in tables.items():
        if not SQL_NAME.match(name):
            raise spec_error(
                f"source.tables.{name}", "is not a table name", "use letters, digits and _"
            )
        if not isinstance(columns, str) or not columns.strip():
            raise spec_error(
                f"source.tables.{name}",
                f"is {columns!r}",
                'write its column definitions: "id text PRIMARY KEY, status text NOT NULL"',
            )
    return dict(tables)


def parse_transactions(src: dict[str, Any], services: tuple[str, ...]) -> tuple[TxnTemplate, ...]:
    """`[[source.transactions]]`: name, weight and statements of each template."""
    raw = src.get("transactions", [])
    if not isinstance(raw, list):
        raise spec_error(
            "source.transactions", "is not a list", "write [[source.transactions]] tables"
        )
    out: list[TxnTemplate] = []
    for i, t in enumerate(raw):
        where = f"source.transactions[{i}]"
        if not isinstance(t, dict):
            raise spec_error(
                where, "is not a table", "write [[source.transactions]] with name and statements"
            )
        only_fields(t, ("name", "weight", "statements"), f"{where}.")
        name = str_field(t, "name", f"{where}.")
        if name is None or not NAME_PATTERN.match(name):
            raise spec_error(
                f"{where}.name", f"is {name!r}", 'write name = "new_order" (letters, digits, _)'
            )
        if any(o.name == name for o in out):
            raise spec_error(f"{where}.name", f"{name!r} is used twice", "give each its own name")
        weight = t.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
            raise spec_error(f"{where}.weight", f"is {weight!r}", "write a number > 0")
        statements = t.get("statements")
        if isinstance(statements, str):
            raise spec_error(
                f"{where}.statements", "is a string", 'write a list: ["INSERT ...", "UPDATE ..."]'
            )
        if (
            not isinstance(statements, list)
            or not statements
            or not all(isinstance(s, str) and s.strip() for s in statements)
        ):
            raise spec_error(
                f"{where}.statements",
                "is missing or holds an empty statement",
                'write statements = ["INSERT INTO {source.schema}.orders VALUES ({key}, ...)"]',
            )
        for text in statements:
            check_template(text, f"{where}.statements", services, TXN_FIELDS)
        out.append(TxnTemplate(name, float(weight), tuple(statements)))
    return tuple(out)


def parse_seed(src: dict[str, Any], folder: Path, services: tuple[str, ...]) -> Seed | None:
    """`seed = { rows = N }` or `seed = { sql = "seed.sql", keys = "SELECT ..." }`."""
    if "seed" not in src:
        return None
    seed = src["seed"]
    fix = 'write seed = { rows = 200 } or seed = { sql = "seed.sql" }'
    if not isinstance(seed, dict):
        raise spec_error("source.seed", f"is {seed!r}", fix)
    only_fields(seed, ("rows", "sql", "keys"), "source.seed.")
    if ("rows" in seed) == ("sql" in seed):
        raise spec_error("source.seed", "needs one of rows and sql", fix)
    if "rows" in seed:
        rows = seed["rows"]
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise spec_error("source.seed.rows", f"is {rows!r}", "write a whole number >= 0")
        if "keys" in seed:
            raise spec_error(
                "source.seed.keys",
                "goes with sql only (rows draws the workload's keys)",
                "remove it, or seed with sql",
            )
        return Seed(rows=rows)
    script = str_field(seed, "sql", "source.seed.")
    assert script is not None
    if not (folder / script).is_file():
        raise spec_error(
            "source.seed.sql",
            f"{script!r} is not a file beside the pipeline file",
            "give a SQL script's path relative to the pipeline file",
        )
    keys = str_field(seed, "keys", "source.seed.")
    if keys is not None:
        check_template(keys, "source.seed.keys", services, ())
    return Seed(sql=script, keys=keys)


def check_transactional(src: dict[str, Any], transactions: tuple[TxnTemplate, ...]) -> None:
    """A source with transactions is written by them alone; `tables` and `seed` need
    them."""
    if transactions:
        own = [k for k in OWN_WRITES if k in src]
        if own:
            raise spec_error(
                f"source.{own[0]}",
                "writes a key-value source, and the file has [[source.transactions]]",
                "remove it: the transactions write the source (a delete is a transaction)",
            )
        if not src.get("tables") and "create" not in src:
            raise spec_error(
                "source",
                "has transactions and no tables",
                'declare tables = { orders = "id text PRIMARY KEY, ..." } or a create script',
            )
        if src.get("tables") and "create" in src:
            raise spec_error(
                "source", "has both tables and create", "keep one of them to make the tables"
            )
        return
    for key in ("tables", "seed"):
        if key in src:
            raise spec_error(
                f"source.{key}",
                "needs [[source.transactions]]",
                "add the transactions that write these tables, or remove it",
            )


def view_fields(
    data: dict[str, Any], where: str, kind: str, services: tuple[str, ...]
) -> tuple[str | None, tuple[str, ...] | None]:
    """A store's `view` (a query with `{key}`) and `compare` (dotted paths)."""
    view = str_field(data, "view", where)
    if kind != "view":
        for key in ("view", "compare"):
            if key in data:
                raise spec_error(
                    f"{where}{key}",
                    f"belongs to a view store, this one is a {kind}",
                    'write kind = "view", or remove it',
                )
        return None, None
    if not view:
        raise spec_error(
            f"{where}view",
            "is missing",
            'write view = "SELECT row_to_json(t) FROM {source.schema}.orders t WHERE id = {key}"',
        )
    check_template(view, f"{where}view", services, ("key",))
    if "key" not in template_names(view, f"{where}view"):
        raise spec_error(
            f"{where}view",
            "does not use {key}",
            "select the one row of the store's key: ... = {key}",
        )
    compare = data.get("compare")
    if compare is None:
        return view, None
    if (
        not isinstance(compare, list)
        or not compare
        or not all(
            isinstance(c, str) and all(NAME_PATTERN.match(p) for p in c.split(".")) for c in compare
        )
    ):
        raise spec_error(
            f"{where}compare",
            f"is {compare!r}",
            'write a list of dotted field paths: compare = ["status", "lines"]',
        )
    return view, tuple(compare)


def check_views(stores: tuple[StoreSpec, ...], transactional: bool) -> None:
    """With transactions every store is a view; without, none is."""
    for s in stores:
        if transactional and s.kind != "view":
            raise spec_error(
                f"stores.{s.name}.kind",
                f"is {s.kind!r}, and the source runs transactions",
                'write kind = "view" and its view (a mirror of a row: '
                '"SELECT row_to_json(t) FROM {source.schema}.orders t WHERE id = {key}")',
            )
        if not transactional and s.kind == "view":
            raise spec_error(
                f"stores.{s.name}.kind",
                "is view, and the source has no [[source.transactions]]",
                "add the transactions that write the source, or use mirror or log",
            )
