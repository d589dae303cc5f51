"""What a pipeline file may name (services, template fields, store kinds) and the
sections `driftlab.scenarios.pipeline.spec.parse` reads into the objects a run uses: pydantic
models with their rules (processes and stores are in spec_sections)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from driftlab.scenarios.pipeline.spec_fields import (
    NAME,
    PORTS,
    Fix,
    Number,
    Section,
    Text,
    refuse,
    templated,
)

SERVICES = ("postgres", "kafka", "connect", "redis", "rabbitmq", "nats")
"""The services of driftlab's stack a pipeline may use."""

EXTERNAL_SCHEMES = {"postgres": "postgresql", "redis": "redis", "connect": "http"}
"""The services a pipeline may give by URL, already running (`connect`: its REST URL,
http or https). Kafka is given by its bootstrap servers
(driftlab.scenarios.pipeline.spec_external)."""

EXTERNAL_UNLINKED = ("kafka",)
"""External services reached directly, with no link in front: Kafka's brokers advertise
their own addresses, which a proxy in front cannot rewrite, so clients would bypass it
after their first request; link faults on them are refused."""

KAFKA_CREDENTIALS = ("user", "password", "mechanism")
"""`{kafka.user}`, `{kafka.password}`: what an external Kafka's table may add."""

SECRET_FIELDS = (
    "postgres.password",
    "redis.password",
    "rabbitmq.url",
    "rabbitmq.password",
    "kafka.password",
)
"""Templates that hold a password. A process's command line is readable by every local
user (`ps`), so a process gets them in `env` only; `{postgres.dsn}` and `{redis.url}`
carry none (the process finds it in PGPASSWORD and REDISCLI_AUTH)."""

HTTP_METHODS = ("PUT", "POST", "PATCH", "DELETE")

StoreKind = Literal["mirror", "log", "view"]
"""`mirror`: holds the latest value per key (a skipped intermediate version is no
loss); `log`: every write must arrive; `view`: holds, per key, the state of a SQL
query over the source (a pipeline with `[[source.transactions]]`)."""

TXN_FIELDS = ("key", "value", "customer", "amount", "lines", "line")
"""What a transaction's statement may use beside the run's templates: the entity key,
a unique value, one of a few customer ids, an amount with two decimals, a line count
1-5 and a line number 1-5. The workload fills them as SQL parameters."""


SQL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""A table name usable unquoted in the file's SQL (`{source.schema}.orders`)."""

OWN_WRITES = ("write", "delete", "read", "http", "http_delete")
"""`[source]` fields that say how a key-value source is written: not with transactions."""


class TxnTemplate(Section):
    """One `[[source.transactions]]`: its statements run in one transaction, the
    template chosen by `weight` among the file's."""

    name: Annotated[Text, Field(pattern=NAME), Fix('write name = "new_order" (letters, digits, _)')]
    weight: Annotated[float, Field(gt=0, strict=True), Fix("write a number > 0")] = 1.0
    statements: Annotated[
        tuple[Annotated[Text, Field(pattern=r"\S"), templated(*TXN_FIELDS)], ...],
        Field(min_length=1),
        Fix('write statements = ["INSERT INTO {source.schema}.orders VALUES ({key}, ...)"]'),
    ]


class Seed(Section):
    """Data in the source before any process starts: `rows` runs of the transaction
    templates, or the SQL script `sql` (a path relative to the pipeline file) after
    which every view is read for the keys the query `keys` returns (None: the
    workload's key space)."""

    rows: Annotated[int, Field(ge=0, strict=True), Fix("write a whole number >= 0")] | None = None
    sql: Text | None = None
    keys: Annotated[Text, templated()] | None = None

    @model_validator(mode="after")
    def _one_way(self, info: ValidationInfo) -> Seed:
        if (self.rows is None) == (self.sql is None):
            raise refuse("needs one of rows and sql", SEED_FIX)
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


SEED_FIX = 'write seed = { rows = 200 } or seed = { sql = "seed.sql" }'


def http_url(url: str, info: ValidationInfo) -> bool:
    """An http:// URL, or one that starts with a process's `{<process>.url}`."""
    urls = tuple(f"{{{p}}}" for p in info.context["ports"] if p.endswith(".url"))
    return url.startswith(("http://", *urls))


def _request(text: str, info: ValidationInfo) -> str:
    method, _, url = text.partition(" ")
    if method not in HTTP_METHODS or not http_url(url, info):
        raise refuse(
            f"is {text!r}",
            'write "PUT http://127.0.0.1:{app.port}/items/{key}" (a method, a URL)',
        )
    return text


Request = Annotated[Text, AfterValidator(_request), templated("key", PORTS)]


class SqlSource(Section):
    """The source of truth: a table driftlab creates, `<namespace>.<table>(key, value,
    version)`, or the user's own statements (`create`, `write`, `delete`, `read`) with
    `{key}`, `{value}` and template placeholders. `write` and `delete` return the new
    version as their first column; `read` returns key, value[, version] of every live
    row. Or the user's application writes it: `http` (and `http_delete`) is a request,
    `"PUT http://127.0.0.1:{shop.port}/items/{key}"`, sent with the JSON body
    `{"key": ..., "value": ...}`; a `version` in its JSON answer is the write's. Or its
    `tables` (name -> column definitions), written by `transactions`, seeded by `seed`."""

    table: Annotated[Text, Field(pattern=NAME), Fix("use letters, digits, _")] = "items"
    create: Annotated[Text, templated(PORTS)] | None = None
    write: Annotated[Text, templated("key", "value")] | None = None
    delete: Annotated[Text, templated("key", "value")] | None = None
    read: Annotated[Text, templated(PORTS)] | None = None
    http: Request | None = None
    http_delete: Request | None = None
    tables: Annotated[
        dict[
            str,
            Annotated[
                Text,
                Field(pattern=r"\S"),
                Fix('write its column definitions: "id text PRIMARY KEY, status text NOT NULL"'),
            ],
        ],
        Fix('write tables = { orders = "id text PRIMARY KEY" }'),
    ] = Field(default_factory=dict)
    transactions: tuple[TxnTemplate, ...] = ()
    seed: Annotated[Seed, Fix(SEED_FIX)] | None = None

    @field_validator("tables")
    @classmethod
    def _table_names(cls, tables: dict[str, str]) -> dict[str, str]:
        for name in tables:
            if not SQL_NAME.match(name):
                raise refuse("is not a table name", "use letters, digits and _", at=name)
        return tables

    @field_validator("transactions")
    @classmethod
    def _names_once(cls, txns: tuple[TxnTemplate, ...]) -> tuple[TxnTemplate, ...]:
        names = [t.name for t in txns]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise refuse(f"{name!r} is used twice", "give each its own name", f"[{i}].name")
        return txns

    @model_validator(mode="after")
    def _one_writer(self) -> SqlSource:
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
        for key in ("tables", "seed"):
            if key in given and not self.transactions:
                raise refuse(
                    "needs [[source.transactions]]",
                    "add the transactions that write these tables, or remove it",
                    at=key,
                )
        if self.http is not None and self.write is not None:
            raise refuse("has both write and http", "keep the one that writes the source")
        if (self.write is None and self.http is None) != (self.read is None):
            raise refuse(
                "has only one of (write or http) and read",
                "give both (your own SQL or application) or neither (driftlab's table)",
            )
        return self

    @property
    def transactional(self) -> bool:
        """Whether the workload runs the file's transactions (its stores are views)."""
        return bool(self.transactions)

    @property
    def own_sql(self) -> bool:
        """Whether the user's statements (or application) replace driftlab's table."""
        return self.write is not None or self.http is not None


class Expect(Section):
    """`[expect]`: the anomaly kinds that must be present or absent."""

    present: Annotated[tuple[Text, ...], Fix('write present = ["stale", ...]')] = ()
    absent: Annotated[tuple[Text, ...], Fix('write absent = ["missing", ...]')] = ()


class Converge(Section):
    """After the heal: wait up to `timeout` s for every store to equal the source; a
    store unchanged for `window` s has settled (converged or not). Stores are sampled
    every `sample_ms` during the whole run."""

    timeout: Number = 30.0
    window: Number = 3.0
    sample_ms: Annotated[float, Field(ge=20, strict=True), Fix("sample every 20 ms or more")] = 200
