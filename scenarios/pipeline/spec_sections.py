"""The [source], [processes.<name>] and [stores.<name>] sections of a pipeline file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from driftlab.scenarios.pipeline.spec_fields import (
    NAME_PATTERN,
    PORTS,
    Fix,
    Number,
    Section,
    Text,
    placeholders_known,
    refuse,
    spec_error,
    template_names,
    templated,
    validated,
)
from driftlab.scenarios.pipeline.spec_model import (
    SECRET_FIELDS,
    SERVICES,
    FieldPaths,
    ProcessSpec,
    SqlSource,
    StoreKind,
    StoreSpec,
    http_url,
)
from driftlab.scenarios.pipeline.spec_txn import Compare, DottedPath, ViewQuery, check_view


def parse_source(
    data: dict[str, Any], services: tuple[str, ...], ports: tuple[str, ...], folder: Path
) -> SqlSource:
    """`[source]`: the table driftlab's workload writes, and how (SQL or HTTP) it
    writes and reads it; or its tables, transactions and seed."""
    return validated(SqlSource, data, "source", services=services, ports=ports, folder=folder)


class Ready(Section):
    """A process's readiness: one of a port, an HTTP GET or a line of its log."""

    tcp: Annotated[int, Field(gt=0, lt=65536, strict=True), Fix("write a port number")] | None = (
        None
    )
    http: Annotated[Text, templated(PORTS)] | None = None
    log: Text | None = None


class ProcessSection(Section):
    """`[processes.<name>]`: one of the user's programs, its command, env and readiness."""

    command: (
        Annotated[tuple[Text, ...], Fix('write a list: command = ["program", "arg", ...]')] | None
    ) = None
    env: Annotated[
        dict[str, Annotated[Text, templated(PORTS)]], Fix('write env = { NAME = "value" }')
    ] = Field(default_factory=dict)
    cwd: Text = "."
    ready: Annotated[Ready, Fix('write ready = { log = "ready" }')] = Ready()
    timeout: Number = 30.0
    image: Text | None = None

    @field_validator("command")
    @classmethod
    def _no_secret(cls, command: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        for arg in command:
            placeholders_known(arg, info, (PORTS,))
            for name in template_names(arg):
                if name in SECRET_FIELDS:
                    raise refuse(
                        f"puts {{{name}}}, a password, on the command line, which every local "
                        "user can read (ps)",
                        f'give it in env instead: SECRET = "{{{name}}}"',
                    )
        return command

    @model_validator(mode="after")
    def _runnable(self) -> ProcessSection:
        if not (self.command or self.image):
            raise refuse("is missing", 'write command = ["program", "arg", ...]', at="command")
        if len(self.ready.model_fields_set) > 1:
            raise refuse("names several checks", "keep one of tcp, http, log", at="ready")
        return self


def parse_process(
    name: str, data: Any, services: tuple[str, ...], ports: tuple[str, ...]
) -> ProcessSpec:
    """`[processes.<name>]`: one of the user's programs, its command, env and readiness."""
    if not NAME_PATTERN.match(name) or name in SERVICES or name == "app":
        raise spec_error(
            f"processes.{name}",
            "is not a usable name",
            "use letters, digits, - and _, not a service's",
        )
    p = validated(ProcessSection, data, f"processes.{name}", services=services, ports=ports)
    return ProcessSpec(
        name=name,
        command=p.command or (),
        env=dict(p.env),
        cwd=p.cwd,
        ready_tcp=p.ready.tcp,
        ready_http=p.ready.http,
        ready_log=p.ready.log,
        ready_timeout=p.timeout,
        image=p.image,
    )


def _one_star(pattern: str) -> str:
    if pattern.count("*") != 1:
        raise refuse(
            f"is {pattern!r}", 'write a pattern with one * standing for the key: "{namespace}:*"'
        )
    return pattern


class RedisReader(Section):
    """Keys matching `pattern`, string values or a hash's `field` (and `version_field`)."""

    pattern: Annotated[
        Text,
        AfterValidator(_one_star),
        templated(),
        Fix('write a pattern with one * standing for the key: "{namespace}:*"'),
    ]
    field: Text | None = None
    version_field: Text | None = None


class Paths(Section):
    """Where a record's or an item's key, value and version are in its JSON."""

    key_field: DottedPath | None = None
    value_field: DottedPath | None = None
    version_field: DottedPath | None = None

    def paths(self) -> FieldPaths:
        """The paths as the readers take them."""
        return FieldPaths(self.key_field, self.value_field, self.version_field)


class KafkaReader(Paths):
    """A topic read to its end."""

    topic: Annotated[
        Text, Field(min_length=1), templated(), Fix('write topic = "{namespace}.items"')
    ]


def _http_store(url: str, info: ValidationInfo) -> str:
    if not http_url(url, info):
        raise refuse(f"is {url!r}", 'write url = "{app.url}/items" (http://...)')
    return url


class HttpReader(Paths):
    """A GET answering JSON."""

    url: Annotated[
        Text,
        AfterValidator(_http_store),
        templated(PORTS),
        Fix('write url = "{app.url}/items" (http://...)'),
    ]


class SqlReader(Section):
    """A query on PostgreSQL returning key, value and optionally version."""

    query: Annotated[
        Text,
        Field(min_length=1),
        templated(),
        Fix('write query = "SELECT key, value FROM ..."'),
    ]


STORE_READERS = ("redis", "sql", "kafka", "http")
"""How a store may be read; a log store by sql, kafka or http (one row, record or item
per arrival)."""


class StoreSection(Section):
    """`[stores.<name>]`: a derived store, its kind and how driftlab reads it."""

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

    @model_validator(mode="after")
    def _one_reader(self, info: ValidationInfo) -> StoreSection:
        check_view(self.kind, self.view, self.model_fields_set)
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


def parse_store(
    name: str, data: Any, services: tuple[str, ...], ports: tuple[str, ...]
) -> StoreSpec:
    """`[stores.<name>]`: a derived store, its kind and how driftlab reads it."""
    if not NAME_PATTERN.match(name) or name == "source":
        raise spec_error(f"stores.{name}", "is not a usable name", "use letters, digits, - and _")
    s = validated(StoreSection, data, f"stores.{name}", services=services, ports=ports)
    views = {"view": s.view, "compare": s.compare}
    if s.redis:
        return StoreSpec(
            name,
            s.kind,
            redis_pattern=s.redis.pattern,
            redis_field=s.redis.field,
            redis_version_field=s.redis.version_field,
            **views,
        )
    if s.kafka:
        return StoreSpec(name, s.kind, kafka_topic=s.kafka.topic, fields=s.kafka.paths(), **views)
    if s.http:
        return StoreSpec(name, s.kind, http_url=s.http.url, fields=s.http.paths(), **views)
    assert s.sql is not None
    return StoreSpec(name, s.kind, sql_query=s.sql.query, **views)
