"""The values a pipeline file's templates stand for, on a running stack.

Each process reaches each service through a Toxiproxy link of its own,
`<process>->service` (the workload's is `app->service`), so a `cut` on
`mirror->redis` partitions that process from Redis and nothing else. A template's
`{postgres.dsn}` is the link's address with the service's credentials.
"""

from __future__ import annotations

import string
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

from harness.services.base import Endpoint
from harness.services.stack_protocol import ServiceStack


def service_fields(service: str, ep: Endpoint) -> dict[str, Any]:
    """What `{service.<field>}` is for one endpoint of `service`."""
    x = ep.extra
    base: dict[str, Any] = {"host": ep.host, "port": ep.port}
    if service == "postgres":
        user, password, db = x.get("user", ""), x.get("password", ""), x.get("dbname", "")
        dsn = f"postgresql://{quote(user)}:{quote(password)}@{ep.host}:{ep.port}/{quote(db)}"
        return {**base, "dsn": dsn, "user": user, "password": password, "dbname": db}
    if service == "redis":
        password = x.get("password") or ""
        auth = f"default:{quote(password)}@" if password else ""
        return {**base, "url": f"redis://{auth}{ep.host}:{ep.port}/0", "password": password}
    if service == "rabbitmq":
        user, password = x.get("user", "guest"), x.get("password", "guest")
        url = f"amqp://{quote(user)}:{quote(password)}@{ep.host}:{ep.port}/%2F"
        return {**base, "url": url, "user": user, "password": password}
    if service == "nats":
        return {**base, "url": f"nats://{ep.host}:{ep.port}"}
    if service == "connect":
        return {**base, "url": f"http://{ep.host}:{ep.port}"}
    return base


def link_values(stack: ServiceStack, client: str, services: tuple[str, ...]) -> dict[str, Any]:
    """`{service.field}` values for `client`, each service reached through its link."""
    out: dict[str, Any] = {}
    for svc in services:
        if svc == "kafka":
            bootstrap = stack["kafka"].link(stack.links, client)  # type: ignore[attr-defined]
            out[svc] = SimpleNamespace(bootstrap=bootstrap)
        else:
            out[svc] = SimpleNamespace(**service_fields(svc, stack.link(client, svc)))
    return out


def direct_values(stack: ServiceStack, services: tuple[str, ...]) -> dict[str, Any]:
    """`{service.field}` values of the services themselves (driftlab's own reads)."""
    out: dict[str, Any] = {}
    for svc in services:
        if svc == "kafka":
            out[svc] = SimpleNamespace(bootstrap=stack["kafka"].bootstrap_servers)  # type: ignore[attr-defined]
        else:
            out[svc] = SimpleNamespace(**service_fields(svc, stack.endpoint(svc)))
    return out


def run_values(namespace: str, table: str, run_dir: Path, pipeline_dir: Path) -> dict[str, Any]:
    """The plain names: `{namespace}`, `{run_dir}`, `{pipeline_dir}`, `{source.table}`."""
    return {
        "namespace": namespace,
        "run_dir": str(run_dir),
        "pipeline_dir": str(pipeline_dir),
        "source": SimpleNamespace(table=f"{namespace}.{table}", schema=namespace),
    }


def fill(text: str, values: dict[str, Any]) -> str:
    """`text` with its placeholders filled (the loader checked their names)."""
    return string.Formatter().vformat(text, (), values)
