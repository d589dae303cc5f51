"""The [processes.<name>] and [stores.<name>] sections of a pipeline file, a view
store's `view` and `compare` among them, and the rule that with
`[[source.transactions]]` every store is a view: the models are the objects the run
uses."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from driftlab.scenarios.pipeline.spec_fields import (
    NAME_PATTERN,
    PORTS,
    Fix,
    Named,
    Number,
    Section,
    Text,
    refuse,
    template_names,
    templated,
)
from driftlab.scenarios.pipeline.spec_model import SECRET_FIELDS, SERVICES, StoreKind, http_url

Port = Annotated[int, Field(gt=0, lt=65536, strict=True), Fix("write a port number")]


class Ready(Section):
    """A process's readiness: one of a port, an HTTP GET or a line of its log."""

    tcp: Port | None = None
    http: Annotated[Text, templated(PORTS)] | None = None
    log: Text | None = None


class ProcessSpec(Named):
    """`[processes.<name>]`: one of the user's programs, `command` (argv), `env`
    (templated), `cwd` (relative to the pipeline file), and readiness (`ready`, within
    `timeout` s). `image`: run as a container of that image on the docker backend
    (`command`, if any, its arguments)."""

    command: Annotated[
        tuple[Annotated[Text, templated(PORTS)], ...],
        Fix('write a list: command = ["program", "arg", ...]'),
    ] = ()
    env: Annotated[
        dict[str, Annotated[Text, templated(PORTS)]], Fix('write env = { NAME = "value" }')
    ] = Field(default_factory=dict)
    cwd: Text = "."
    ready: Annotated[Ready, Fix('write ready = { log = "ready" }')] = Ready()
    timeout: Number = 30.0
    image: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _usable_name(cls, data: Any, info: ValidationInfo) -> Any:
        """Its key names its links (`<process>->redis`): no service's, nor the workload's."""
        name = info.context["name"]
        if not NAME_PATTERN.match(name) or name in SERVICES or name == "app":
            raise refuse("is not a usable name", "use letters, digits, - and _, not a service's")
        return data

    @field_validator("command")
    @classmethod
    def _no_secret(cls, command: tuple[str, ...]) -> tuple[str, ...]:
        for arg in command:
            for name in template_names(arg):
                if name in SECRET_FIELDS:
                    raise refuse(
                        f"puts {{{name}}}, a password, on the command line, which every local "
                        "user can read (ps)",
                        f'give it in env instead: SECRET = "{{{name}}}"',
                    )
        return command

    @model_validator(mode="after")
    def _runnable(self) -> ProcessSpec:
        if not (self.command or self.image):
            raise refuse("is missing", 'write command = ["program", "arg", ...]', at="command")
        if len(self.ready.model_fields_set) > 1:
            raise refuse("names several checks", "keep one of tcp, http, log", at="ready")
        return self

    @property
    def ready_log(self) -> str | None:
        """The line of its log that says it is ready (None: another check, or none)."""
        return self.ready.log


class RedisReader(Section):
    """Keys matching `pattern` (its one `*` is the key), string values or a hash's
    `field` (and `version_field`)."""

    pattern: Annotated[
        Text,
        Field(pattern=r"^[^*]*\*[^*]*$"),
        templated(),
        Fix('write a pattern with one * standing for the key: "{namespace}:*"'),
    ]
    field: Text | None = None
    version_field: Text | None = None


ROW_VIEW = '"SELECT row_to_json(t) FROM {source.schema}.orders t WHERE id = {key}"'
"""A view store's view: the JSON of a row."""

DOTTED = r"^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*$"
DottedPath = Annotated[
    Text, Field(pattern=DOTTED), Fix('write a dotted path of field names: "after.value"')
]
"""`after.value`: the `value` of the object `after`, each part a name."""


ViewQuery = Annotated[Text, templated("key")]
"""A view store's `view`: a query of the source with `{key}`."""

Compare = Annotated[
    tuple[DottedPath, ...],
    Field(min_length=1),
    Fix('write a list of dotted field paths: compare = ["status", "lines"]'),
]
"""A view store's `compare`: the dotted fields of its view's JSON compared."""


class FieldPaths(Section, validate_by_name=True):
    """Where a Kafka record's or an HTTP item's key, value and version are: dotted paths
    into its JSON (`after.value`: the `value` of the object `after`). For Kafka, `key`
    is a path into the record's key and `value` and `version` into its value; None: the
    record's key or value itself, as text (and no version). The file names them
    `key_field`, ... (`validated` takes no other name); code may use either."""

    key: DottedPath | None = Field(None, alias="key_field")
    value: DottedPath | None = Field(None, alias="value_field")
    version: DottedPath | None = Field(None, alias="version_field")


class KafkaReader(FieldPaths):
    """A topic read to its end, each record a (key, value)."""

    topic: Annotated[
        Text, Field(min_length=1), templated(), Fix('write topic = "{namespace}.items"')
    ]


def _http_store(url: str, info: ValidationInfo) -> str:
    if not http_url(url, info):
        raise refuse(f"is {url!r}", 'write url = "{app.url}/items" (http://...)')
    return url


class HttpReader(FieldPaths):
    """A GET answering JSON, an object key -> value or a list of objects."""

    url: Annotated[
        Text,
        AfterValidator(_http_store),
        templated(PORTS),
        Fix('write url = "{app.url}/items" (http://...)'),
    ]


class SqlReader(Section):
    """A query on PostgreSQL returning key, value and optionally version of every row."""

    query: Annotated[
        Text,
        Field(min_length=1),
        templated(),
        Fix('write query = "SELECT key, value FROM ..."'),
    ]


STORE_READERS = ("redis", "sql", "kafka", "http")
"""How a store may be read; a log store by sql, kafka or http (one row, record or item
per arrival)."""


class StoreSpec(Named):
    """`[stores.<name>]`: a derived store and how driftlab reads it: one reader (redis,
    sql, kafka or http, each its section above); of a `log` store, one row, record or
    item per write that arrived (a kafka mirror: the latest record per key, a null value
    deleting it). A `view` store holds, per key, the one value `view` (a query with
    `{key}`) returns at the source, or nothing when it returns no row; `compare` names
    the dotted fields of that JSON compared (None: all of it)."""

    kind: Annotated[
        StoreKind,
        Fix("use mirror (latest value per key), log or view (a query's state per key)"),
    ] = "mirror"
    redis: RedisReader | None = None
    sql: SqlReader | None = None
    kafka: KafkaReader | None = None
    http: HttpReader | None = None
    view: ViewQuery | None = None
    compare: Compare | None = None

    @model_validator(mode="before")
    @classmethod
    def _usable_name(cls, data: Any, info: ValidationInfo) -> Any:
        """A name; `source` is the source of truth's in a run's history and read_stores."""
        if not NAME_PATTERN.match(info.context["name"]) or info.context["name"] == "source":
            raise refuse("is not a usable name", "use letters, digits, - and _")
        return data

    @model_validator(mode="after")
    def _one_reader(self, info: ValidationInfo) -> StoreSpec:
        if self.kind != "view":
            for key in ("view", "compare"):
                if key in self.model_fields_set:
                    raise refuse(
                        f"belongs to a view store, this one is a {self.kind}",
                        'write kind = "view", or remove it',
                        at=key,
                    )
        elif self.view is None:
            raise refuse("is missing", f"write view = {ROW_VIEW}", at="view")
        elif "key" not in template_names(self.view):
            raise refuse(
                "does not use {key}",
                "select the one row of the store's key: ... = {key}",
                at="view",
            )
        readers = [k for k in STORE_READERS if getattr(self, k) is not None]
        if len(readers) != 1:
            raise refuse(
                "needs one reader",
                "give one of redis = {...}, sql = {...}, kafka = {...}, http = {...}",
            )
        (reader,) = readers
        if self.kind == "log" and reader == "redis":
            raise refuse(
                "is a log store read from redis",
                'read it with sql = { query = "SELECT key, value FROM ..." } (one row per'
                " arrival), kafka or http",
            )
        if reader in ("redis", "kafka") and reader not in info.context["services"]:
            raise refuse(
                f"reads {reader}, not in services", f'add "{reader}" to services', at=reader
            )
        return self

    @model_validator(mode="after")
    def _view_with_transactions(self, info: ValidationInfo) -> StoreSpec:
        """With transactions every store is a view; without, none is."""
        if info.context["transactional"] and self.kind != "view":
            raise refuse(
                f"is {self.kind!r}, and the source runs transactions",
                f'write kind = "view" and its view (a mirror of a row: {ROW_VIEW})',
                at="kind",
            )
        if not info.context["transactional"] and self.kind == "view":
            raise refuse(
                "is view, and the source has no [[source.transactions]]",
                "add the transactions that write the source, or use mirror or log",
                at="kind",
            )
        return self

    @property
    def fields(self) -> FieldPaths:
        """Where a Kafka record's or an HTTP item's key, value and version are."""
        return self.kafka or self.http or FieldPaths()

    @property
    def versioned(self) -> bool | None:
        """Whether the store's reads carry a version: None where only a run can tell
        (a SQL query may or may not return a version column)."""
        if self.sql is not None:
            return None
        if self.redis is not None:
            return self.redis.version_field is not None
        return self.fields.version is not None
