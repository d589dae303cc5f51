"""The transactional parts of a pipeline file: `[source] tables`, `seed`,
`[[source.transactions]]`, and a view store's `view` and `compare`."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from harness.pipeline.spec_fields import (
    NAME,
    Fix,
    Section,
    Text,
    refuse,
    spec_error,
    template_names,
    templated,
)
from harness.pipeline.spec_model import TXN_FIELDS, Seed, StoreSpec, TxnTemplate

SQL_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
"""A table name usable unquoted in the file's SQL (`{source.schema}.orders`)."""

OWN_WRITES = ("write", "delete", "read", "http", "http_delete")
"""`[source]` fields that say how a key-value source is written: not with transactions."""

DOTTED = r"^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*$"
DottedPath = Annotated[
    Text, Field(pattern=DOTTED), Fix('write a dotted path of field names: "after.value"')
]
"""`after.value`: the `value` of the object `after`, each part a name."""

Columns = Annotated[
    Text,
    Field(pattern=r"\S"),
    Fix('write its column definitions: "id text PRIMARY KEY, status text NOT NULL"'),
]
Statement = Annotated[Text, Field(pattern=r"\S"), templated(*TXN_FIELDS)]


class TxnSection(Section):
    """One `[[source.transactions]]`."""

    name: Annotated[Text, Field(pattern=NAME), Fix('write name = "new_order" (letters, digits, _)')]
    weight: Annotated[float, Field(gt=0, strict=True)] = 1.0
    statements: Annotated[
        tuple[Statement, ...],
        Field(min_length=1),
        Fix('write statements = ["INSERT INTO {source.schema}.orders VALUES ({key}, ...)"]'),
    ]

    def loaded(self) -> TxnTemplate:
        """The transaction the workload runs."""
        return TxnTemplate(self.name, self.weight, self.statements)


class SeedSection(Section):
    """`seed = { rows = N }` or `seed = { sql = "seed.sql", keys = "SELECT ..." }`."""

    rows: Annotated[int, Field(ge=0, strict=True), Fix("write a whole number >= 0")] | None = None
    sql: Text | None = None
    keys: Annotated[Text, templated()] | None = None

    @model_validator(mode="after")
    def _one_way(self, info: ValidationInfo) -> SeedSection:
        if (self.rows is None) == (self.sql is None):
            raise refuse(
                "needs one of rows and sql",
                'write seed = { rows = 200 } or seed = { sql = "seed.sql" }',
            )
        if self.rows is not None and self.keys is not None:
            raise refuse(
                "goes with sql only (rows draws the workload's keys)",
                "remove it, or seed with sql",
                at="keys",
            )
        if self.sql is not None and not (info.context["folder"] / self.sql).is_file():
            raise refuse(
                f"{self.sql!r} is not a file beside the pipeline file",
                "give a SQL script's path relative to the pipeline file",
                at="sql",
            )
        return self

    def loaded(self) -> Seed:
        """The seed the run writes."""
        return Seed(self.rows, self.sql, self.keys)


class Transactional(Section):
    """The transactional fields of `[source]`: its tables, transactions and seed."""

    tables: Annotated[
        dict[str, Columns], Fix('write tables = { orders = "id text PRIMARY KEY" }')
    ] = Field(default_factory=dict)
    transactions: tuple[TxnSection, ...] = ()
    seed: (
        Annotated[SeedSection, Fix('write seed = { rows = 200 } or seed = { sql = "seed.sql" }')]
        | None
    ) = None

    @field_validator("tables")
    @classmethod
    def _table_names(cls, tables: dict[str, str]) -> dict[str, str]:
        for name in tables:
            if not re.match(SQL_NAME, name):
                raise refuse("is not a table name", "use letters, digits and _", at=name)
        return tables

    @field_validator("transactions")
    @classmethod
    def _names_once(cls, txns: tuple[TxnSection, ...]) -> tuple[TxnSection, ...]:
        names = [t.name for t in txns]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise refuse(f"{name!r} is used twice", "give each its own name", f"[{i}].name")
        return txns

    def check_transactional(self) -> None:
        """A source with transactions is written by them alone; `tables` and `seed` need
        them (raised within validation)."""
        given = self.model_fields_set
        if self.transactions:
            own = [k for k in OWN_WRITES if k in given]
            if own:
                raise refuse(
                    "writes a key-value source, and the file has [[source.transactions]]",
                    "remove it: the transactions write the source (a delete is a transaction)",
                    at=own[0],
                )
            if not self.tables and "create" not in given:
                raise refuse(
                    "has transactions and no tables",
                    'declare tables = { orders = "id text PRIMARY KEY, ..." } or a create script',
                )
            if self.tables and "create" in given:
                raise refuse("has both tables and create", "keep one of them to make the tables")
            return
        for key in ("tables", "seed"):
            if key in given:
                raise refuse(
                    "needs [[source.transactions]]",
                    "add the transactions that write these tables, or remove it",
                    at=key,
                )


def _uses_key(view: str) -> str:
    if "key" not in template_names(view):
        raise refuse("does not use {key}", "select the one row of the store's key: ... = {key}")
    return view


class ViewFields(Section):
    """A store's `view` (a query with `{key}`) and `compare` (dotted paths)."""

    view: Annotated[Text, templated("key"), AfterValidator(_uses_key)] | None = None
    compare: (
        Annotated[
            tuple[DottedPath, ...],
            Field(min_length=1),
            Fix('write a list of dotted field paths: compare = ["status", "lines"]'),
        ]
        | None
    ) = None

    def check_view(self, kind: str) -> None:
        """`view` and `compare` on a view store only, which needs its view (raised within
        validation)."""
        if kind != "view":
            for key in ("view", "compare"):
                if key in self.model_fields_set:
                    raise refuse(
                        f"belongs to a view store, this one is a {kind}",
                        'write kind = "view", or remove it',
                        at=key,
                    )
        elif self.view is None:
            raise refuse(
                "is missing",
                'write view = "SELECT row_to_json(t) FROM {source.schema}.orders t'
                ' WHERE id = {key}"',
                at="view",
            )


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
