"""What a pipeline file may name (services, template fields, store kinds) and the
dataclasses `harness.pipeline.spec.parse` builds from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.nemesis.schedule import Schedule
from harness.services.base import Endpoint
from harness.workload.spec import WorkloadSpec

SERVICES = ("postgres", "kafka", "connect", "redis", "rabbitmq", "nats")
"""The services of driftlab's stack a pipeline may use."""

EXTERNAL_SCHEMES = {"postgres": "postgresql", "redis": "redis", "connect": "http"}
"""The services a pipeline may give by URL, already running (`connect`: its REST URL,
http or https). Kafka is given by its bootstrap servers (harness.pipeline.spec_external)."""

EXTERNAL_UNLINKED = ("kafka",)
"""External services reached directly, with no link in front: Kafka's brokers advertise
their own addresses, which a proxy in front cannot rewrite, so clients would bypass it
after their first request; link faults on them are refused."""

KAFKA_CREDENTIALS = ("user", "password", "mechanism")
"""`{kafka.user}`, `{kafka.password}`: what an external Kafka's table may add."""

SERVICE_FIELDS: dict[str, tuple[str, ...]] = {
    "postgres": ("dsn", "jdbc_url", "host", "port", "user", "password", "dbname"),
    "redis": ("url", "host", "port", "password"),
    "kafka": (
        "bootstrap",
        "security_protocol",
        "sasl_mechanism",
        "username",
        "password",
        "client_properties",
    ),
    "connect": ("url", "host", "port"),
    "rabbitmq": ("url", "host", "port", "user", "password"),
    "nats": ("url", "host", "port"),
}
"""What a template may ask of each service's link: `{postgres.dsn}`, `{redis.url}`, ..."""

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

RUN_FIELDS = ("namespace", "run_dir", "pipeline_dir", "python")
"""Plain template names: the run's namespace (unique: a schema, a key prefix, a slot
name), the run folder, the pipeline file's folder, the Python driftlab runs on (with
psycopg and redis-py). Each process adds `{<process>.port}`, a free port drawn per run,
and `{<process>.url}`, `http://127.0.0.1:<that port>`."""

HTTP_METHODS = ("PUT", "POST", "PATCH", "DELETE")

SOURCE_FIELDS = ("table", "schema")
"""`{source.table}` (schema-qualified) and `{source.schema}` (the namespace)."""

STORE_KINDS = ("mirror", "log", "view")
"""`mirror`: holds the latest value per key (a skipped intermediate version is no
loss); `log`: every write must arrive; `view`: holds, per key, the state of a SQL
query over the source (a pipeline with `[[source.transactions]]`)."""

TXN_FIELDS = ("key", "value", "customer", "amount", "lines", "line")
"""What a transaction's statement may use beside the run's templates: the entity key,
a unique value, one of a few customer ids, an amount with two decimals, a line count
1-5 and a line number 1-5. The workload fills them as SQL parameters."""


class PipelineError(ValueError):
    """A pipeline file that cannot be used: the message names the field and the fix."""


@dataclass(frozen=True)
class TxnTemplate:
    """One `[[source.transactions]]`: its statements run in one transaction, the
    template chosen by `weight` among the file's."""

    name: str
    weight: float
    statements: tuple[str, ...]


@dataclass(frozen=True)
class Seed:
    """Data in the source before any process starts: `rows` runs of the transaction
    templates, or the SQL script `sql` (a path relative to the pipeline file) after
    which every view is read for the keys the query `keys` returns (None: the
    workload's key space)."""

    rows: int | None = None
    sql: str | None = None
    keys: str | None = None


@dataclass(frozen=True)
class SqlSource:
    """The source of truth: a table driftlab creates, `<namespace>.<table>(key, value,
    version)`, or the user's own statements (`create`, `write`, `delete`, `read`) with
    `{key}`, `{value}` and template placeholders. `write` and `delete` return the new
    version as their first column; `read` returns key, value[, version] of every live
    row. Or the user's application writes it: `http` (and `http_delete`) is a request,
    `"PUT http://127.0.0.1:{shop.port}/items/{key}"`, sent with the JSON body
    `{"key": ..., "value": ...}`; a `version` in its JSON answer is the write's."""

    table: str = "items"
    create: str | None = None
    write: str | None = None
    delete: str | None = None
    read: str | None = None
    http: str | None = None
    http_delete: str | None = None
    tables: dict[str, str] = field(default_factory=dict)  # name -> its column definitions
    transactions: tuple[TxnTemplate, ...] = ()
    seed: Seed | None = None

    @property
    def transactional(self) -> bool:
        """Whether the workload runs the file's transactions (its stores are views)."""
        return bool(self.transactions)

    @property
    def own_sql(self) -> bool:
        """Whether the user's statements (or application) replace driftlab's table."""
        return self.write is not None or self.http is not None


@dataclass(frozen=True)
class ProcessSpec:
    """One of the user's programs: `command` (argv), `env` (templated), `cwd` (relative
    to the pipeline file), and readiness: `ready_tcp`, `ready_http` or `ready_log`.
    `image`: run as a container of that image on the docker backend (`command`, if any,
    its arguments)."""

    name: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "."
    ready_tcp: int | None = None
    ready_http: str | None = None
    ready_log: str | None = None
    ready_timeout: float = 30.0
    image: str | None = None


@dataclass(frozen=True)
class FieldPaths:
    """Where a Kafka record's or an HTTP item's key, value and version are: dotted paths
    into its JSON (`after.value`: the `value` of the object `after`). For Kafka, `key`
    is a path into the record's key and `value` and `version` into its value; None: the
    record's key or value itself, as text (and no version)."""

    key: str | None = None
    value: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class StoreSpec:
    """A derived store and how driftlab reads it.

    `redis`: keys matching `pattern` (its one `*` is the key), string values, or the
    hash field `field` (and `version_field`). `sql`: a query on PostgreSQL returning
    key, value and optionally version of every row; of a `log` store, one row per
    write that arrived. `kafka`: a topic read to its end, each record a (key, value):
    the latest per key (a mirror; a null value deletes the key) or every record (a
    log). `http`: a GET answering JSON, an object key -> value or a list of objects.
    `fields` says where key, value and version are in a record's JSON (FieldPaths).
    A `view` store holds, per key, the one value `view` (a query with `{key}`) returns
    at the source, or nothing when it returns no row; `compare` names the dotted
    fields of that JSON compared (None: all of it)."""

    name: str
    kind: str = "mirror"
    redis_pattern: str | None = None
    redis_field: str | None = None
    redis_version_field: str | None = None
    sql_query: str | None = None
    kafka_topic: str | None = None
    http_url: str | None = None
    fields: FieldPaths = field(default_factory=lambda: FieldPaths())
    view: str | None = None
    compare: tuple[str, ...] | None = None

    @property
    def versioned(self) -> bool | None:
        """Whether the store's reads carry a version: None where only a run can tell
        (a SQL query may or may not return a version column)."""
        if self.sql_query is not None:
            return None
        if self.redis_pattern is not None:
            return self.redis_version_field is not None
        return self.fields.version is not None


@dataclass(frozen=True)
class ConnectorSpec:
    """A Kafka Connect connector of the pipeline: its config as Connect takes it, each
    value a template. `name` is the pipeline's; on the worker it is registered as
    `<namespace>_<name>`, so runs never share a connector's offsets."""

    name: str
    config: dict[str, str]


@dataclass(frozen=True)
class Converge:
    """After the heal: wait up to `timeout` s for every store to equal the source; a
    store unchanged for `window` s has settled (converged or not). Stores are sampled
    every `sample_ms` during the whole run."""

    timeout: float = 30.0
    window: float = 3.0
    sample_ms: int = 200


@dataclass(frozen=True)
class Pipeline:
    """A loaded pipeline file."""

    name: str
    path: Path
    services: tuple[str, ...]  # started on driftlab's stack
    source: SqlSource
    processes: tuple[ProcessSpec, ...]
    stores: tuple[StoreSpec, ...]
    workload: WorkloadSpec
    faults: Schedule
    expectations: dict[str, str]
    converge: Converge
    summary: str = ""
    external: dict[str, Endpoint] = field(default_factory=dict)  # already running
    connectors: tuple[ConnectorSpec, ...] = ()

    @property
    def reached(self) -> tuple[str, ...]:
        """Every service the pipeline uses: driftlab's and the external ones."""
        return (*self.services, *self.external)

    @property
    def folder(self) -> Path:
        """The pipeline file's folder: relative paths are relative to it."""
        return self.path.parent
