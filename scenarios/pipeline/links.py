"""The values a pipeline file's templates stand for, on a running stack.

Each process reaches each service (driftlab's or an external one) through a Toxiproxy
link of its own,
`<process>->service` (the workload's is `app->service`), so a `cut` on
`mirror->redis` partitions that process from Redis and nothing else.

No template that a script may put on a command line holds a password: any local user
reads command lines (`ps`). `{postgres.dsn}` is the link's address with the user and
no password, `{redis.url}` likewise; a process whose strings name the service finds
the password in its environment, where libpq (psql, psycopg), Go's pgx and lib/pq,
node-postgres and asyncpg read `PGPASSWORD`, and redis-cli `REDISCLI_AUTH`
(`login_env`). On driftlab's own PostgreSQL that login is the run's role
(driftlab.scenarios.pipeline.run_role), never the stack's superuser.
"""

from __future__ import annotations

import string
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.harness.lab.services.toxiproxy import link_name


def service_fields(service: str, ep: Endpoint) -> dict[str, Any]:
    """What `{service.<field>}` is for one endpoint of `service`."""
    x = ep.extra
    base: dict[str, Any] = {"host": ep.host, "port": ep.port}
    if service == "postgres":
        user, password, db = x.get("user", ""), x.get("password", ""), x.get("dbname", "")
        dsn = f"postgresql://{quote(user)}@{ep.host}:{ep.port}/{quote(db)}"
        jdbc_url = f"jdbc:postgresql://{ep.host}:{ep.port}/{quote(db)}"
        return {
            **base,
            "dsn": dsn,
            "jdbc_url": jdbc_url,
            "user": user,
            "password": password,
            "dbname": db,
        }
    if service == "redis":
        password = x.get("password") or ""
        return {**base, "url": f"redis://{ep.host}:{ep.port}/0", "password": password}
    if service == "rabbitmq":
        user, password = x.get("user", "guest"), x.get("password", "guest")
        url = f"amqp://{quote(user)}:{quote(password)}@{ep.host}:{ep.port}/%2F"
        return {**base, "url": url, "user": user, "password": password}
    if service == "nats":
        return {**base, "url": f"nats://{ep.host}:{ep.port}"}
    if service == "connect":
        return {**base, "url": f"{x.get('scheme', 'http')}://{ep.host}:{ep.port}"}
    return base


@dataclass(frozen=True)
class Reach:
    """How the run reaches each service: driftlab's own through the stack, an external
    one (already running, given by URL) through a Toxiproxy link driftlab makes in
    front of it, so link faults act on it alike."""

    stack: ServiceStack
    external: dict[str, Endpoint] = field(default_factory=dict)
    logins: dict[str, dict[str, str]] = field(default_factory=dict)
    """service -> the login (`user`, `password`) the pipeline's parties use instead of
    the service's own: the run's PostgreSQL role."""

    def endpoint(self, service: str) -> Endpoint:
        """The service's own address, with its own login (driftlab's reads, never
        faults)."""
        ext = self.external.get(service)
        return ext if ext is not None else self.stack.endpoint(service)

    def pipeline_endpoint(self, service: str) -> Endpoint:
        """The service's own address with the login of the pipeline's parties (the
        run's DDL runs so, and owns what it creates)."""
        return self._as_pipeline(service, self.endpoint(service))

    def _as_pipeline(self, service: str, ep: Endpoint) -> Endpoint:
        """`ep` with the login of the pipeline's parties."""
        login = self.logins.get(service)
        return ep if login is None else Endpoint(ep.host, ep.port, {**ep.extra, **login})

    def kafka_config(self) -> dict[str, Any]:
        """driftlab's own client config for the pipeline's Kafka, reached directly: the
        stack's, with its login; an external one's bootstrap servers, with the file's
        `user` and `password` as a SASL login (`mechanism`, SCRAM-SHA-256 unless given)."""
        ext = self.external.get("kafka")
        if ext is None:
            return kafka_client_config(self.stack)
        config: dict[str, Any] = {"bootstrap.servers": ext.extra["bootstrap"]}
        if "user" in ext.extra:
            config |= {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": ext.extra.get("mechanism", "SCRAM-SHA-256"),
                "sasl.username": ext.extra["user"],
                "sasl.password": ext.extra.get("password", ""),
            }
        return config

    def link(self, client: str, service: str) -> Endpoint:
        """The address of the link `client->service`, with the pipeline's login."""
        ext = self.external.get(service)
        if ext is None:
            ep = self.stack.link(client, service)
        else:
            ep = self.stack.links.create(link_name(client, service), ext)
        return self._as_pipeline(service, ep)

    def values(self, client: str | None, services: tuple[str, ...]) -> dict[str, Any]:
        """`{service.field}` values for `client`'s links (None: the services themselves)."""
        out: dict[str, Any] = {}
        for svc in services:
            if svc == "kafka" and svc in self.external:
                # Reached directly (spec.EXTERNAL_UNLINKED): the same for every client.
                out[svc] = SimpleNamespace(**self.external[svc].extra)
                continue
            if svc == "kafka":
                out[svc] = SimpleNamespace(**self.kafka_fields(client))
                continue
            ep = self.pipeline_endpoint(svc) if client is None else self.link(client, svc)
            out[svc] = SimpleNamespace(**service_fields(svc, ep))
        return out

    def kafka_fields(self, client: str | None) -> dict[str, Any]:
        """`{kafka.<field>}` for `client`'s link (None: the nodes): the bootstrap
        servers and the login Kafka asks every client for."""
        config = kafka_client_config(self.stack, client)
        kafka: Any = self.stack["kafka"]
        return {
            "bootstrap": config["bootstrap.servers"],
            "security_protocol": config["security.protocol"],
            "sasl_mechanism": config["sasl.mechanism"],
            "username": config["sasl.username"],
            "password": config["sasl.password"],
            # A Java client's login (security.protocol, sasl.mechanism, sasl.jaas.config).
            "client_properties": str(kafka.client_properties()),
        }


LOGIN_VARIABLES = {"postgres": "PGPASSWORD", "redis": "REDISCLI_AUTH"}
"""service -> the environment variable its command-line clients read the password from
(libpq's, and so psql's, psycopg's, pgx's; redis-cli's)."""


def login_env(strings: list[str], values: dict[str, Any]) -> dict[str, str]:
    """The passwords a process whose `strings` (command, env, ready) name a service
    needs in its environment, as LOGIN_VARIABLES says, from its template `values`."""
    named = {
        name.split(".")[0]
        for text in strings
        for _, name, _, _ in string.Formatter().parse(text)
        if name is not None
    }
    out = {}
    for service, variable in LOGIN_VARIABLES.items():
        password = getattr(values.get(service), "password", "") if service in named else ""
        if password:
            out[variable] = password
    return out


def run_values(
    namespace: str, table: str, run_dir: Path, pipeline_dir: Path, ports: dict[str, int]
) -> dict[str, Any]:
    """The plain names: `{namespace}`, `{run_dir}`, `{pipeline_dir}`, `{python}`,
    `{source.table}`, and each process's `{<process>.port}`."""
    return {
        "namespace": namespace,
        "run_dir": str(run_dir),
        "pipeline_dir": str(pipeline_dir),
        "python": sys.executable,
        "source": SimpleNamespace(table=f"{namespace}.{table}", schema=namespace),
        **{
            name: SimpleNamespace(port=port, url=f"http://127.0.0.1:{port}")
            for name, port in ports.items()
        },
    }


def fill(text: str, values: dict[str, Any]) -> str:
    """`text` with its placeholders filled (the loader checked their names)."""
    return string.Formatter().vformat(text, (), values)
