"""A pipeline's services: driftlab's own (`services`) and those already running, given
by URL (`[external]`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import unquote, urlsplit

from driftlab.harness.lab.services.base import Endpoint
from driftlab.scenarios.pipeline.spec_fields import Fix, Section, Text, spec_error, validated
from driftlab.scenarios.pipeline.spec_model import EXTERNAL_SCHEMES, KAFKA_CREDENTIALS, SERVICES


def parse_services(raw: tuple[str, ...], external: dict[str, Endpoint]) -> tuple[str, ...]:
    """`services`: the services of driftlab's stack the pipeline uses (none given by URL too)."""
    for svc in raw:
        if svc not in SERVICES:
            raise spec_error(
                "services", f"{svc!r} is not a driftlab service", f"use: {', '.join(SERVICES)}"
            )
        if svc in external:
            raise spec_error(
                "services", f"{svc!r} is external too", "keep it in one of services and external"
            )
    if "postgres" not in raw and "postgres" not in external:
        raise spec_error(
            "services",
            "lacks postgres, the source of truth",
            'add "postgres" (or give external.postgres)',
        )
    return tuple(dict.fromkeys(raw))


def parse_external(ext: dict[str, Any]) -> dict[str, Endpoint]:
    """`[external]`: services already running, each by URL (driftlab puts a link in
    front of each, so link faults reach them; crashes do not)."""
    out: dict[str, Endpoint] = {}
    for svc, url in ext.items():
        where = f"external.{svc}"
        if svc == "kafka":
            out[svc] = _external_kafka(url)
            continue
        if svc not in EXTERNAL_SCHEMES:
            raise spec_error(
                where,
                "is not a service driftlab can reach from outside yet",
                f"use one of: kafka, {', '.join(EXTERNAL_SCHEMES)} (or driftlab's own in services)",
            )
        scheme = EXTERNAL_SCHEMES[svc]
        u = urlsplit(url if isinstance(url, str) else "")  # no string: no scheme, refused
        try:
            port = u.port
        except ValueError:  # not a number, or out of range
            port = None
        schemes = {"postgres": (scheme, "postgres"), "connect": ("http", "https")}
        if u.scheme not in schemes.get(svc, (scheme,)) or not (u.hostname and port):
            fix = f'write "{scheme}://user:password@host:port/..."'
            raise spec_error(where, f"is {url!r}", fix)
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


class KafkaExternal(Section):
    """`external.kafka` as a table: the bootstrap servers and the login."""

    bootstrap: Annotated[Text, Fix('write bootstrap = "host:port,host:port"')]
    user: Text | None = None
    password: Text | None = None
    mechanism: Text | None = None


def _external_kafka(value: Any) -> Endpoint:
    """`external.kafka`: "host:port[,host:port]" (the bootstrap servers), or a table
    with `bootstrap` and the `user`, `password` and SASL `mechanism` the programs (and
    driftlab's reader of a topic) log in with."""
    where, fix = "external.kafka", 'write "host:port,host:port" or { bootstrap = "host:port" }'
    if not isinstance(value, str | dict):
        raise spec_error(where, f"is {value!r}", fix)
    table = validated(
        KafkaExternal, value if isinstance(value, dict) else {"bootstrap": value}, where
    )
    hosts = []
    for server in table.bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or "/" in host or not port.isdigit():
            raise spec_error(where, f"has {server.strip()!r}, not host:port", fix)
        hosts.append((host, int(port)))
    extra = {"bootstrap": ",".join(f"{h}:{p}" for h, p in hosts)}
    extra |= table.model_dump(include=set(KAFKA_CREDENTIALS), exclude_none=True)
    return Endpoint(hosts[0][0], hosts[0][1], extra)


def with_external(data: dict[str, Any], urls: Mapping[str, str]) -> dict[str, Any]:
    """The file's table with `urls` in its `[external]` (over the file's own entries)
    and those services off its `services`: the same file run against services a test
    suite started (driftlab.scenarios.pipeline.containers)."""
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
