"""The [source], [processes.<name>] and [stores.<name>] sections of a pipeline file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.pipeline.spec_fields import (
    NAME_PATTERN,
    check_template,
    number_field,
    only_fields,
    spec_error,
    str_field,
    table_field,
    template_names,
)
from harness.pipeline.spec_model import (
    HTTP_METHODS,
    SECRET_FIELDS,
    SERVICES,
    STORE_KINDS,
    FieldPaths,
    ProcessSpec,
    SqlSource,
    StoreSpec,
)
from harness.pipeline.spec_txn import (
    check_transactional,
    parse_seed,
    parse_tables,
    parse_transactions,
    view_fields,
)


def _http_url(url: str, ports: tuple[str, ...]) -> bool:
    """An http:// URL, or one that starts with a process's `{<process>.url}`."""
    urls = tuple(f"{{{p}}}" for p in ports if p.endswith(".url"))
    return url.startswith(("http://", *urls))


def parse_source(
    data: dict[str, Any], services: tuple[str, ...], ports: tuple[str, ...], folder: Path
) -> SqlSource:
    """`[source]`: the table driftlab's workload writes, and how (SQL or HTTP) it
    writes and reads it; or its tables, transactions and seed."""
    src = table_field(data, "source", "")
    keys = ("table", "create", "write", "delete", "read", "http", "http_delete")
    only_fields(src, (*keys, "tables", "transactions", "seed"), "source.")
    table = str_field(src, "table", "source.", "items") or "items"
    if not NAME_PATTERN.match(table):
        raise spec_error("source.table", f"{table!r} is not a table name", "use letters, digits, _")
    transactions = parse_transactions(src, services)
    check_transactional(src, transactions)
    out = SqlSource(
        table=table,
        **{k: str_field(src, k, "source.") for k in keys[1:]},
        tables=parse_tables(src),
        transactions=transactions,
        seed=parse_seed(src, folder, services),
    )
    if out.http is not None and out.write is not None:
        raise spec_error("source", "has both write and http", "keep the one that writes the source")
    if (out.write is None and out.http is None) != (out.read is None):
        raise spec_error(
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
                raise spec_error(
                    f"source.{key}",
                    f"is {text!r}",
                    'write "PUT http://127.0.0.1:{app.port}/items/{key}" (a method, a URL)',
                )
            extra = ("key", *ports)
        check_template(text, f"source.{key}", services, extra)
    return out


def parse_process(
    name: str, data: Any, services: tuple[str, ...], ports: tuple[str, ...]
) -> ProcessSpec:
    """`[processes.<name>]`: one of the user's programs, its command, env and readiness."""
    where = f"processes.{name}."
    if not NAME_PATTERN.match(name) or name in SERVICES or name == "app":
        raise spec_error(
            f"processes.{name}",
            "is not a usable name",
            "use letters, digits, - and _, not a service's",
        )
    if not isinstance(data, dict):
        raise spec_error(f"processes.{name}", "is not a table", f"write [processes.{name}]")
    only_fields(data, ("command", "env", "cwd", "ready", "timeout", "image"), where)
    image = str_field(data, "image", where)
    command = data.get("command", [] if image else None)
    if isinstance(command, str):
        raise spec_error(f"{where}command", "is a string", 'write a list: ["bash", "mirror.sh"]')
    if (
        not isinstance(command, list)
        or not (command or image)
        or not all(isinstance(a, str) for a in command)
    ):
        raise spec_error(f"{where}command", "is missing", 'write command = ["program", "arg", ...]')
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise spec_error(
            f"{where}env", "is not a table of strings", 'write env = { NAME = "value" }'
        )
    for arg in command:
        check_template(arg, f"{where}command", services, ports)
        for field in template_names(arg, f"{where}command"):
            if field in SECRET_FIELDS:
                raise spec_error(
                    f"{where}command",
                    f"puts {{{field}}}, a password, on the command line, which every local "
                    "user can read (ps)",
                    f'give it in env instead: SECRET = "{{{field}}}"',
                )
    for key, value in env.items():
        check_template(value, f"{where}env.{key}", services, ports)
    ready = data.get("ready", {})
    if not isinstance(ready, dict):
        raise spec_error(f"{where}ready", "is not a table", 'write ready = { log = "ready" }')
    only_fields(ready, ("tcp", "http", "log"), f"{where}ready.")
    if len(ready) > 1:
        raise spec_error(f"{where}ready", "names several checks", "keep one of tcp, http, log")
    tcp = ready.get("tcp")
    if tcp is not None and (not isinstance(tcp, int) or not 0 < tcp < 65536):
        raise spec_error(f"{where}ready.tcp", f"is {tcp!r}", "write a port number")
    http = str_field(ready, "http", f"{where}ready.")
    if http is not None:
        check_template(http, f"{where}ready.http", services, ports)
    return ProcessSpec(
        name=name,
        command=tuple(command),
        env=dict(env),
        cwd=str_field(data, "cwd", where, ".") or ".",
        ready_tcp=tcp,
        ready_http=http,
        ready_log=str_field(ready, "log", f"{where}ready."),
        ready_timeout=number_field(data, "timeout", where, 30.0),
        image=image,
    )


STORE_READERS = ("redis", "sql", "kafka", "http")
"""How a store may be read; a log store by sql, kafka or http (one row, record or item
per arrival)."""


def _paths(data: dict[str, Any], where: str) -> FieldPaths:
    """`key_field`, `value_field`, `version_field`: dotted paths, each part a name."""
    out = {}
    for part in ("key", "value", "version"):
        path = str_field(data, f"{part}_field", where)
        if path is not None and not all(NAME_PATTERN.match(p) for p in path.split(".")):
            raise spec_error(
                f"{where}{part}_field",
                f"is {path!r}",
                'write a dotted path of field names: "after.value"',
            )
        out[part] = path
    return FieldPaths(**out)


def parse_store(
    name: str, data: Any, services: tuple[str, ...], ports: tuple[str, ...]
) -> StoreSpec:
    """`[stores.<name>]`: a derived store, its kind and how driftlab reads it."""
    where = f"stores.{name}."
    if not NAME_PATTERN.match(name) or name == "source":
        raise spec_error(f"stores.{name}", "is not a usable name", "use letters, digits, - and _")
    if not isinstance(data, dict):
        raise spec_error(f"stores.{name}", "is not a table", f"write [stores.{name}]")
    only_fields(data, ("kind", *STORE_READERS, "view", "compare"), where)
    kind = str_field(data, "kind", where, "mirror") or "mirror"
    if kind not in STORE_KINDS:
        raise spec_error(
            f"{where}kind",
            f"is {kind!r}",
            "use mirror (latest value per key), log or view (a query's state per key)",
        )
    view, compare = view_fields(data, where, kind, services)
    readers = [k for k in STORE_READERS if k in data]
    if len(readers) != 1:
        raise spec_error(
            f"stores.{name}",
            "needs one reader",
            "give one of redis = {...}, sql = {...}, kafka = {...}, http = {...}",
        )
    (reader,) = readers
    if kind == "log" and reader == "redis":
        raise spec_error(
            f"stores.{name}",
            "is a log store read from redis",
            'read it with sql = { query = "SELECT key, value FROM ..." } (one row per arrival),'
            " kafka or http",
        )
    r = data[reader]
    if not isinstance(r, dict):
        raise spec_error(f"{where}{reader}", "is not a table", f"write {reader} = {{ ... }}")
    at = f"{where}{reader}."
    if reader in ("redis", "kafka") and reader not in services:
        raise spec_error(
            f"{where}{reader}", f"reads {reader}, not in services", f'add "{reader}" to services'
        )
    if reader == "redis":
        only_fields(r, ("pattern", "field", "version_field"), at)
        pattern = str_field(r, "pattern", at)
        if pattern is None or pattern.count("*") != 1:
            raise spec_error(
                f"{at}pattern",
                f"is {pattern!r}",
                'write a pattern with one * standing for the key: "{namespace}:*"',
            )
        check_template(pattern, f"{at}pattern", services, ())
        return StoreSpec(
            name,
            kind,
            redis_pattern=pattern,
            redis_field=str_field(r, "field", at),
            redis_version_field=str_field(r, "version_field", at),
            view=view,
            compare=compare,
        )
    if reader == "kafka":
        only_fields(r, ("topic", "key_field", "value_field", "version_field"), at)
        topic = str_field(r, "topic", at)
        if not topic:
            raise spec_error(f"{at}topic", "is missing", 'write topic = "{namespace}.items"')
        check_template(topic, f"{at}topic", services, ())
        return StoreSpec(
            name, kind, kafka_topic=topic, fields=_paths(r, at), view=view, compare=compare
        )
    if reader == "http":
        only_fields(r, ("url", "key_field", "value_field", "version_field"), at)
        url = str_field(r, "url", at)
        if not url or not _http_url(url, ports):
            raise spec_error(
                f"{at}url", f"is {url!r}", 'write url = "{app.url}/items" (http://...)'
            )
        check_template(url, f"{at}url", services, ports)
        return StoreSpec(name, kind, http_url=url, fields=_paths(r, at), view=view, compare=compare)
    only_fields(r, ("query",), at)
    query = str_field(r, "query", at)
    if not query:
        raise spec_error(f"{at}query", "is missing", 'write query = "SELECT key, value FROM ..."')
    check_template(query, f"{at}query", services, ())
    return StoreSpec(name, kind, sql_query=query, view=view, compare=compare)
