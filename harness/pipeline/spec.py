"""The pipeline file: a user's pipeline described in TOML, with no Python.

TOML, read by the standard library's `tomllib`: no dependency to install, comments
for the starting files `driftlab init` writes, and typed values (numbers, lists,
tables) without YAML's surprises (`no` read as false, `1.10` as a float).

    name = "pg-to-redis"                # the run folder's name
    services = ["postgres", "redis"]    # from driftlab's stack
    [external]                          # or services already running, by URL
    [source]                            # the system of record the workload writes
    [processes.<name>]                  # the user's programs: command, env, ready
    [stores.<name>]                     # derived stores, and how driftlab reads them
    [workload]                          # keys, clients, rate, duration, mix
    [[connectors]]                      # Kafka Connect connectors, as their JSON configs
    [[faults]]                          # the fault schedule (docs/scenarios.md)
    [expect]                            # anomaly kinds present / absent
    [converge]                          # how long to wait for the stores to settle

`load` returns a `Pipeline` or raises `PipelineError`, one line naming the field and
the fix. Templates (`{postgres.dsn}`, `{namespace}`, ...) are checked here against the
declared services; they are filled in at run time (harness.pipeline.links).
"""

from __future__ import annotations

import json
import re
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from harness.nemesis.schedule import FaultSpec, Schedule
from harness.services.base import Endpoint
from harness.workload.spec import WorkloadSpec

SERVICES = ("postgres", "kafka", "connect", "redis", "rabbitmq", "nats")
"""The services of driftlab's stack a pipeline may use."""

EXTERNAL_SCHEMES = {"postgres": "postgresql", "redis": "redis", "connect": "http"}
"""The services a pipeline may give by URL, already running (`connect`: its REST URL,
http or https). Kafka is given by its bootstrap servers (`_external_kafka`)."""

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

RUN_FIELDS = ("namespace", "run_dir", "pipeline_dir", "python")
"""Plain template names: the run's namespace (unique: a schema, a key prefix, a slot
name), the run folder, the pipeline file's folder, the Python driftlab runs on (with
psycopg and redis-py). Each process adds `{<process>.port}`, a free port drawn per run,
and `{<process>.url}`, `http://127.0.0.1:<that port>`."""

HTTP_METHODS = ("PUT", "POST", "PATCH", "DELETE")

SOURCE_FIELDS = ("table", "schema")
"""`{source.table}` (schema-qualified) and `{source.schema}` (the namespace)."""

STORE_KINDS = ("mirror", "log")
"""`mirror`: holds the latest value per key (a skipped intermediate version is no
loss); `log`: every write must arrive."""


class PipelineError(ValueError):
    """A pipeline file that cannot be used: the message names the field and the fix."""


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
    `fields` says where key, value and version are in a record's JSON (FieldPaths)."""

    name: str
    kind: str = "mirror"
    redis_pattern: str | None = None
    redis_field: str | None = None
    redis_version_field: str | None = None
    sql_query: str | None = None
    kafka_topic: str | None = None
    http_url: str | None = None
    fields: FieldPaths = field(default_factory=lambda: FieldPaths())

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


_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def _fail(where: str, problem: str, fix: str) -> PipelineError:
    return PipelineError(f"{where}: {problem}; {fix}")


def _table(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise _fail(f"{where}{key}", f"is {type(value).__name__}", f"write a [{key}] table")
    return value


def _only(data: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise _fail(
            f"{where}{unknown[0]}", "is not a known field", f"use one of: {', '.join(known)}"
        )


def _str(data: dict[str, Any], key: str, where: str, default: str | None = None) -> str | None:
    value = data.get(key, default)
    if value is not None and not isinstance(value, str):
        raise _fail(f"{where}{key}", f"is {value!r}", "write a string in quotes")
    return value


def _number(data: dict[str, Any], key: str, where: str, default: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise _fail(f"{where}{key}", f"is {value!r}", "write a number >= 0")
    return float(value)


def template_names(text: str, where: str) -> list[str]:
    """The placeholders of `text` (`{postgres.dsn}` -> "postgres.dsn")."""
    try:
        return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise _fail(
            where, f"{text!r} is not a valid template ({exc})", "write {{ for a brace"
        ) from None


def check_template(
    text: str, where: str, services: tuple[str, ...], extra: tuple[str, ...]
) -> None:
    """Raise PipelineError if `text` names a placeholder the run cannot fill."""
    allowed = set(RUN_FIELDS) | set(extra) | {f"source.{f}" for f in SOURCE_FIELDS}
    for svc in services:
        allowed |= {f"{svc}.{f}" for f in SERVICE_FIELDS[svc]}
    for name in template_names(text, where):
        if name not in allowed:
            svc = name.split(".")[0]
            if svc in SERVICE_FIELDS and svc not in services:
                fix = f'add "{svc}" to services'
            else:
                fix = f"use one of: {', '.join(sorted(allowed))}"
            raise _fail(where, f"{{{name}}} is not known", fix)


def _services(data: dict[str, Any], external: dict[str, Endpoint]) -> tuple[str, ...]:
    raw = data.get("services", [])
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        raise _fail("services", "is not a list of names", 'write services = ["postgres", ...]')
    for svc in raw:
        if svc not in SERVICES:
            raise _fail(
                "services", f"{svc!r} is not a driftlab service", f"use: {', '.join(SERVICES)}"
            )
        if svc in external:
            raise _fail(
                "services", f"{svc!r} is external too", "keep it in one of services and external"
            )
    if "postgres" not in raw and "postgres" not in external:
        raise _fail(
            "services",
            "lacks postgres, the source of truth",
            'add "postgres" (or give external.postgres)',
        )
    return tuple(dict.fromkeys(raw))


def _external(data: dict[str, Any]) -> dict[str, Endpoint]:
    """`[external]`: services already running, each by URL (driftlab puts a link in
    front of each, so link faults reach them; crashes do not)."""
    ext = _table(data, "external", "")
    out: dict[str, Endpoint] = {}
    for svc, url in ext.items():
        where = f"external.{svc}"
        if svc == "kafka":
            out[svc] = _external_kafka(url)
            continue
        if svc not in EXTERNAL_SCHEMES:
            raise _fail(
                where,
                "is not a service driftlab can reach from outside yet",
                f"use one of: kafka, {', '.join(EXTERNAL_SCHEMES)} (or driftlab's own in services)",
            )
        scheme = EXTERNAL_SCHEMES[svc]
        if not isinstance(url, str):
            raise _fail(where, f"is {url!r}", f'write "{scheme}://user:password@host:port/..."')
        u = urlsplit(url)
        try:
            port = u.port
        except ValueError:
            port = None
        schemes = {"postgres": (scheme, "postgres"), "connect": ("http", "https")}
        if u.scheme not in schemes.get(svc, (scheme,)) or not (u.hostname and port):
            raise _fail(where, f"is {url!r}", f'write "{scheme}://user:password@host:port/..."')
        extra: dict[str, str] = {}
        if u.password:
            extra["password"] = unquote(u.password)
        if svc == "postgres":
            extra["user"] = unquote(u.username or "postgres")
            extra["dbname"] = unquote(u.path.lstrip("/") or extra["user"])
        if svc == "connect":
            extra["url"] = url  # its REST API, credentials included
            extra["scheme"] = u.scheme
        out[svc] = Endpoint(u.hostname, port, extra)
    return out


def _external_kafka(value: Any) -> Endpoint:
    """`external.kafka`: "host:port[,host:port]" (the bootstrap servers), or a table
    with `bootstrap` and the `user`, `password` and SASL `mechanism` the programs (and
    driftlab's reader of a topic) log in with."""
    where, fix = "external.kafka", 'write "host:port,host:port" or { bootstrap = "host:port" }'
    table = value if isinstance(value, dict) else {"bootstrap": value}
    _only(table, ("bootstrap", *KAFKA_CREDENTIALS), f"{where}.")
    bootstrap = table.get("bootstrap")
    if not isinstance(bootstrap, str):
        raise _fail(where, f"is {value!r}", fix)
    hosts = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or "/" in host or not port.isdigit():
            raise _fail(where, f"has {server.strip()!r}, not host:port", fix)
        hosts.append((host, int(port)))
    extra = {"bootstrap": ",".join(f"{h}:{p}" for h, p in hosts)}
    for key in KAFKA_CREDENTIALS:
        given = _str(table, key, f"{where}.")
        if given is not None:
            extra[key] = given
    return Endpoint(hosts[0][0], hosts[0][1], extra)


def _http_url(url: str, ports: tuple[str, ...]) -> bool:
    """An http:// URL, or one that starts with a process's `{<process>.url}`."""
    urls = tuple(f"{{{p}}}" for p in ports if p.endswith(".url"))
    return url.startswith(("http://", *urls))


def _source(data: dict[str, Any], services: tuple[str, ...], ports: tuple[str, ...]) -> SqlSource:
    src = _table(data, "source", "")
    keys = ("table", "create", "write", "delete", "read", "http", "http_delete")
    _only(src, keys, "source.")
    table = _str(src, "table", "source.", "items") or "items"
    if not _NAME.match(table):
        raise _fail("source.table", f"{table!r} is not a table name", "use letters, digits, _")
    out = SqlSource(table=table, **{k: _str(src, k, "source.") for k in keys[1:]})
    if out.http is not None and out.write is not None:
        raise _fail("source", "has both write and http", "keep the one that writes the source")
    if (out.write is None and out.http is None) != (out.read is None):
        raise _fail(
            "source",
            "has only one of (write or http) and read",
            "give both (your own SQL or application) or neither (driftlab's table)",
        )
    for key in keys[1:]:
        text = getattr(out, key)
        if text is None:
            continue
        extra = ("key", "value") if key in ("write", "delete") else ports
        if key.startswith("http"):
            method, _, url = text.partition(" ")
            if method not in HTTP_METHODS or not _http_url(url, ports):
                raise _fail(
                    f"source.{key}",
                    f"is {text!r}",
                    'write "PUT http://127.0.0.1:{app.port}/items/{key}" (a method, a URL)',
                )
            extra = ("key", *ports)
        check_template(text, f"source.{key}", services, extra)
    return out


def _process(
    name: str, data: Any, services: tuple[str, ...], ports: tuple[str, ...]
) -> ProcessSpec:
    where = f"processes.{name}."
    if not _NAME.match(name) or name in SERVICES or name == "app":
        raise _fail(
            f"processes.{name}",
            "is not a usable name",
            "use letters, digits, - and _, not a service's",
        )
    if not isinstance(data, dict):
        raise _fail(f"processes.{name}", "is not a table", f"write [processes.{name}]")
    _only(data, ("command", "env", "cwd", "ready", "timeout", "image"), where)
    image = _str(data, "image", where)
    command = data.get("command", [] if image else None)
    if isinstance(command, str):
        raise _fail(f"{where}command", "is a string", 'write a list: ["bash", "mirror.sh"]')
    if (
        not isinstance(command, list)
        or not (command or image)
        or not all(isinstance(a, str) for a in command)
    ):
        raise _fail(f"{where}command", "is missing", 'write command = ["program", "arg", ...]')
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise _fail(f"{where}env", "is not a table of strings", 'write env = { NAME = "value" }')
    for arg in command:
        check_template(arg, f"{where}command", services, ports)
    for key, value in env.items():
        check_template(value, f"{where}env.{key}", services, ports)
    ready = data.get("ready", {})
    if not isinstance(ready, dict):
        raise _fail(f"{where}ready", "is not a table", 'write ready = { log = "ready" }')
    _only(ready, ("tcp", "http", "log"), f"{where}ready.")
    if len(ready) > 1:
        raise _fail(f"{where}ready", "names several checks", "keep one of tcp, http, log")
    tcp = ready.get("tcp")
    if tcp is not None and (not isinstance(tcp, int) or not 0 < tcp < 65536):
        raise _fail(f"{where}ready.tcp", f"is {tcp!r}", "write a port number")
    http = _str(ready, "http", f"{where}ready.")
    if http is not None:
        check_template(http, f"{where}ready.http", services, ports)
    return ProcessSpec(
        name=name,
        command=tuple(command),
        env=dict(env),
        cwd=_str(data, "cwd", where, ".") or ".",
        ready_tcp=tcp,
        ready_http=http,
        ready_log=_str(ready, "log", f"{where}ready."),
        ready_timeout=_number(data, "timeout", where, 30.0),
        image=image,
    )


STORE_READERS = ("redis", "sql", "kafka", "http")
"""How a store may be read; a log store by sql, kafka or http (one row, record or item
per arrival)."""


def _paths(data: dict[str, Any], where: str) -> FieldPaths:
    """`key_field`, `value_field`, `version_field`: dotted paths, each part a name."""
    out = {}
    for part in ("key", "value", "version"):
        path = _str(data, f"{part}_field", where)
        if path is not None and not all(_NAME.match(p) for p in path.split(".")):
            raise _fail(
                f"{where}{part}_field",
                f"is {path!r}",
                'write a dotted path of field names: "after.value"',
            )
        out[part] = path
    return FieldPaths(**out)


def _store(name: str, data: Any, services: tuple[str, ...], ports: tuple[str, ...]) -> StoreSpec:
    where = f"stores.{name}."
    if not _NAME.match(name) or name == "source":
        raise _fail(f"stores.{name}", "is not a usable name", "use letters, digits, - and _")
    if not isinstance(data, dict):
        raise _fail(f"stores.{name}", "is not a table", f"write [stores.{name}]")
    _only(data, ("kind", *STORE_READERS), where)
    kind = _str(data, "kind", where, "mirror")
    if kind not in STORE_KINDS:
        raise _fail(f"{where}kind", f"is {kind!r}", "use mirror (latest value per key) or log")
    readers = [k for k in STORE_READERS if k in data]
    if len(readers) != 1:
        raise _fail(
            f"stores.{name}",
            "needs one reader",
            "give one of redis = {...}, sql = {...}, kafka = {...}, http = {...}",
        )
    (reader,) = readers
    if kind == "log" and reader == "redis":
        raise _fail(
            f"stores.{name}",
            "is a log store read from redis",
            'read it with sql = { query = "SELECT key, value FROM ..." } (one row per arrival),'
            " kafka or http",
        )
    r = data[reader]
    if not isinstance(r, dict):
        raise _fail(f"{where}{reader}", "is not a table", f"write {reader} = {{ ... }}")
    at = f"{where}{reader}."
    if reader in ("redis", "kafka") and reader not in services:
        raise _fail(
            f"{where}{reader}", f"reads {reader}, not in services", f'add "{reader}" to services'
        )
    if reader == "redis":
        _only(r, ("pattern", "field", "version_field"), at)
        pattern = _str(r, "pattern", at)
        if pattern is None or pattern.count("*") != 1:
            raise _fail(
                f"{at}pattern",
                f"is {pattern!r}",
                'write a pattern with one * standing for the key: "{namespace}:*"',
            )
        check_template(pattern, f"{at}pattern", services, ())
        return StoreSpec(
            name,
            kind,
            redis_pattern=pattern,
            redis_field=_str(r, "field", at),
            redis_version_field=_str(r, "version_field", at),
        )
    if reader == "kafka":
        _only(r, ("topic", "key_field", "value_field", "version_field"), at)
        topic = _str(r, "topic", at)
        if not topic:
            raise _fail(f"{at}topic", "is missing", 'write topic = "{namespace}.items"')
        check_template(topic, f"{at}topic", services, ())
        return StoreSpec(name, kind, kafka_topic=topic, fields=_paths(r, at))
    if reader == "http":
        _only(r, ("url", "key_field", "value_field", "version_field"), at)
        url = _str(r, "url", at)
        if not url or not _http_url(url, ports):
            raise _fail(f"{at}url", f"is {url!r}", 'write url = "{app.url}/items" (http://...)')
        check_template(url, f"{at}url", services, ports)
        return StoreSpec(name, kind, http_url=url, fields=_paths(r, at))
    _only(r, ("query",), at)
    query = _str(r, "query", at)
    if not query:
        raise _fail(f"{at}query", "is missing", 'write query = "SELECT key, value FROM ..."')
    check_template(query, f"{at}query", services, ())
    return StoreSpec(name, kind, sql_query=query)


def _faults(
    data: dict[str, Any],
    processes: tuple[str, ...],
    services: tuple[str, ...],
    own: tuple[str, ...],
) -> Schedule:
    raw = data.get("faults", [])
    if not isinstance(raw, list):
        raise _fail("faults", "is not a list", "write [[faults]] tables")
    windows = []
    for i, f in enumerate(raw):
        where = f"faults[{i}]"
        if not isinstance(f, dict):
            raise _fail(where, "is not a table", "write [[faults]] with kind, target, at")
        try:
            spec = FaultSpec.from_dict(f)
        except (ValueError, TypeError) as exc:
            raise PipelineError(f"{where}: {exc}") from None
        if spec.kind in ("app-crash", "slow-consumer"):
            raise _fail(
                f"{where}.kind",
                f"{spec.kind} acts on driftlab's own code",
                "use crash, pause, cut, ...",
            )
        if spec.kind in ("crash", "pause", "restart"):
            ok = spec.target in processes or spec.target in own
            fix = f"name a process or a service driftlab runs: {', '.join(processes + own)}"
        else:
            client, _, svc = spec.target.rpartition("->")
            # The Connect worker's own links (connect->postgres) when it runs connectors.
            clients = ("", "app", *processes, *(("connect",) if "connect" in services else ()))
            ok = svc in services and client in clients
            fix = (
                "name a service (the workload's link) or a process's link "
                f"such as {processes[0] if processes else 'app'}->{services[-1]}"
            )
            if ok and svc in EXTERNAL_UNLINKED and svc not in own:
                raise _fail(
                    f"{where}.target",
                    f"{spec.target!r} is an external {svc}, reached with no link (its "
                    "brokers advertise their own addresses, which a link cannot rewrite)",
                    f'fault another link, or use driftlab\'s {svc} (services = ["{svc}"])',
                )
        if not ok:
            raise _fail(f"{where}.target", f"{spec.target!r} is not in this pipeline", fix)
        windows.append(spec)
    recovery = _number(data, "recovery", "", 2.0)
    return Schedule(tuple(windows), recovery)


CONNECT_REFERENCE = re.compile(r"\$\{([^{}]*)\}")
"""Connect's own `${provider:path:key}` and the JDBC sink's `${topic}`: kept as written."""


def connect_template(text: str) -> str:
    """A connector config value as a driftlab template: Connect's `${...}` escaped, so
    only driftlab's `{postgres.host}`-style placeholders are filled."""
    return CONNECT_REFERENCE.sub(lambda m: "${{" + m.group(1) + "}}", text)


def _config_value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise _fail(where, f"is {value!r}", "write a string, a number or true/false")


def _connector(
    i: int, data: Any, folder: Path, services: tuple[str, ...], ports: tuple[str, ...]
) -> ConnectorSpec:
    where = f"connectors[{i}]"
    if not isinstance(data, dict):
        raise _fail(where, "is not a table", "write [[connectors]] with name and config or file")
    _only(data, ("name", "config", "file"), f"{where}.")
    if ("config" in data) == ("file" in data):
        raise _fail(
            where,
            "needs one of config and file",
            'give config = { "connector.class" = ... } or file = "connector.json"',
        )
    name = _str(data, "name", f"{where}.")
    raw: Any = data.get("config")
    if "file" in data:
        file = _str(data, "file", f"{where}.") or ""
        path = folder / file
        try:
            raw = json.loads(path.read_text())
        except OSError as exc:
            raise _fail(
                f"{where}.file", f"{file!r} cannot be read ({exc.strerror})", "give a JSON file"
            ) from None
        except ValueError as exc:
            raise _fail(f"{where}.file", f"{file!r} is not JSON ({exc})", "fix it there") from None
        # Connect's POST /connectors body, {"name": ..., "config": {...}}, or the config.
        if isinstance(raw, dict) and isinstance(raw.get("config"), dict):
            name = name or _str(raw, "name", f"{where}.file: ")
            raw = raw["config"]
    if not isinstance(raw, dict) or not raw:
        raise _fail(f"{where}.config", "is not a table of settings", "give the connector's config")
    name = name or _str(raw, "name", f"{where}.config.")
    if not name or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise _fail(
            f"{where}.name", f"is {name!r}", "name the connector: letters, digits, _, . and -"
        )
    config: dict[str, str] = {}
    for key, value in raw.items():
        if key == "name":
            continue  # the worker's name is driftlab's: <namespace>_<name>
        text = _config_value(value, f"{where}.config.{key}")
        check_template(connect_template(text), f"{where}.config.{key}", services, ports)
        config[key] = text
    if "connector.class" not in config:
        raise _fail(
            f"{where}.config",
            "lacks connector.class",
            'give "connector.class" = "io.debezium.connector.postgresql.PostgresConnector" ...',
        )
    return ConnectorSpec(name, config)


def _connectors(
    data: dict[str, Any],
    folder: Path,
    own: tuple[str, ...],
    services: tuple[str, ...],
    ports: tuple[str, ...],
) -> tuple[ConnectorSpec, ...]:
    """`[[connectors]]`: run on driftlab's Connect worker or the user's (`external.connect`),
    which reaches every other service through links of its own (`connect->postgres`)."""
    raw = data.get("connectors", [])
    if not isinstance(raw, list):
        raise _fail("connectors", "is not a list", "write [[connectors]] tables")
    if raw and "connect" not in services:
        raise _fail(
            "connectors",
            "need a Connect worker",
            'add "connect" to services (or give your own: external.connect = "http://host:port")',
        )
    if raw and "connect" in own and "kafka" in services and "kafka" not in own:
        raise _fail(
            "connectors",
            "run on driftlab's Connect worker, which works on driftlab's Kafka, not external.kafka",
            "give your own worker too (external.connect) or use driftlab's kafka",
        )
    reached = tuple(s for s in services if s != "connect")
    out = tuple(_connector(i, c, folder, reached, ports) for i, c in enumerate(raw))
    names = [c.name for c in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _fail("connectors", f"name {twice[0]!r} twice", "give each connector its own name")
    return out


_UNSEEN_FROM_OUTSIDE = {
    kind: "it is judged from a broker's sends and deliveries"
    for kind in (
        "lost-message",
        "duplicate-delivery",
        "duplicate-offset",
        "reorder-delivery",
        "nonmonotonic-poll",
        "poll-skip",
        "nonmonotonic-send",
        "inconsistent-offset",
    )
}
"""Kinds a pipeline run never has a chance to find: driftlab reads a pipeline's stores
from outside and records no writes or broker traffic of its programs, so naming one
would only end every run inconclusive."""

VERSIONED_KINDS = ("stale-overwrite",)
"""Kinds judged from the versions a store shows (a key seen at version 5, later at 3):
a pipeline may name them only when one of its stores is read with a version."""


def _expectations(data: dict[str, Any], stores: tuple[StoreSpec, ...]) -> dict[str, str]:
    from checkers.anomaly import ALL_KINDS

    exp = _table(data, "expect", "")
    _only(exp, ("present", "absent"), "expect.")
    out: dict[str, str] = {}
    for want in ("present", "absent"):
        kinds = exp.get(want, [])
        if not isinstance(kinds, list):
            raise _fail(f"expect.{want}", "is not a list", f'write {want} = ["stale", ...]')
        for kind in kinds:
            if kind not in ALL_KINDS:
                raise _fail(
                    f"expect.{want}",
                    f"{kind!r} is not an anomaly kind",
                    f"use: {', '.join(ALL_KINDS)}",
                )
            if kind in _UNSEEN_FROM_OUTSIDE:
                raise _fail(
                    f"expect.{want}",
                    f"{kind!r} cannot be judged on a pipeline: {_UNSEEN_FROM_OUTSIDE[kind]},"
                    " which driftlab does not see from outside your programs",
                    "remove it (missing, stale, phantom, extra, a log store's lost-write and"
                    " duplicate-apply, and with versions stale-overwrite are judged;"
                    " docs/pipelines.md)",
                )
            if kind in VERSIONED_KINDS and all(s.versioned is False for s in stores):
                raise _fail(
                    f"expect.{want}",
                    f"{kind!r} is judged from the versions a store shows, and no store is"
                    " read with one",
                    "give a store's version: redis version_field, kafka or http"
                    " version_field, or a sql query's third column",
                )
            out[kind] = want
    return out


def _workload(data: dict[str, Any]) -> WorkloadSpec:
    wl = _table(data, "workload", "")
    try:
        return WorkloadSpec.from_dict(
            {"mix": {"write": 1.0}, "distribution": "uniform", "rate": 100.0, **wl}
        )
    except (ValueError, TypeError) as exc:
        raise PipelineError(f"workload: {exc}") from None


def parse(data: dict[str, Any], path: Path) -> Pipeline:
    """A Pipeline from the TOML's table (`path` names the file, for relative paths)."""
    _only(
        data,
        (
            "name",
            "summary",
            "services",
            "external",
            "recovery",
            "source",
            "processes",
            "stores",
            "workload",
            "faults",
            "expect",
            "converge",
            "connectors",
        ),
        "",
    )
    name = _str(data, "name", "", path.stem) or path.stem
    if not _NAME.match(name):
        raise _fail(
            "name", f"{name!r} is not usable as a folder name", "use letters, digits, - and _"
        )
    external = _external(data)
    own = _services(data, external)
    services = (*own, *external)  # what templates, stores and link faults may name
    procs_raw = _table(data, "processes", "")
    kafka = external.get("kafka")
    credentials = tuple(f"kafka.{k}" for k in KAFKA_CREDENTIALS if kafka and k in kafka.extra)
    # {<process>.port}, {<process>.url}, and an external Kafka's {kafka.user}, ...
    ports = (*(f"{n}.{f}" for n in procs_raw for f in ("port", "url")), *credentials)
    processes = tuple(_process(n, d, services, ports) for n, d in procs_raw.items())
    stores_raw = _table(data, "stores", "")
    if not stores_raw:
        raise _fail("stores", "is empty", "declare at least one [stores.<name>] to read")
    stores = tuple(_store(n, d, services, ports) for n, d in stores_raw.items())
    conv = _table(data, "converge", "")
    _only(conv, ("timeout", "window", "sample_ms"), "converge.")
    converge = Converge(
        timeout=_number(conv, "timeout", "converge.", 30.0),
        window=_number(conv, "window", "converge.", 3.0),
        sample_ms=int(_number(conv, "sample_ms", "converge.", 200)),
    )
    if converge.sample_ms < 20:
        raise _fail("converge.sample_ms", f"is {converge.sample_ms}", "sample every 20 ms or more")
    workload = _workload(data)
    store_names = {s.name for s in stores}
    bad_reads = set(workload.read_stores or ()) - store_names - {"source"}
    if bad_reads:
        raise _fail(
            "workload.read_stores",
            f"names {sorted(bad_reads)}",
            f"use source or: {', '.join(sorted(store_names))}",
        )
    return Pipeline(
        name=name,
        path=path,
        services=own,
        external=external,
        source=_source(data, services, ports),
        processes=processes,
        stores=stores,
        workload=workload,
        faults=_faults(data, tuple(p.name for p in processes), services, own),
        expectations=_expectations(data, stores),
        converge=converge,
        summary=_str(data, "summary", "", "") or "",
        connectors=_connectors(data, path.parent, own, services, ports),
    )


def with_external(data: dict[str, Any], urls: Mapping[str, str]) -> dict[str, Any]:
    """The file's table with `urls` in its `[external]` (over the file's own entries)
    and those services off its `services`: the same file run against services a test
    suite started (harness.pipeline.containers)."""
    if not urls:
        return data
    ext = data.get("external", {})
    services = data.get("services", [])
    return {
        **data,
        "external": {**ext, **urls} if isinstance(ext, dict) else ext,
        "services": [s for s in services if s not in urls]
        if isinstance(services, list)
        else services,
    }


def load(path: Path, external: Mapping[str, str] | None = None) -> Pipeline:
    """Read and check the pipeline file at `path`, with `external` services by URL
    instead of the file's (`with_external`); PipelineError says what to fix."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PipelineError(
            f"{path}: cannot be read ({exc.strerror}); give a pipeline file's path"
        ) from None
    try:
        data = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PipelineError(f"{path}: not valid TOML ({exc}); fix the syntax there") from None
    return parse(with_external(data, external or {}), path.resolve())
