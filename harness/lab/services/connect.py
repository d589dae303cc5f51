"""Kafka Connect (standalone worker) running the Debezium PostgreSQL connector, whose
configuration is debezium.py.

Registration: a connector's configuration is a .properties file in the worker's folder
(<stack>/data/<name>/connectors/), and every start of the standalone worker is given all
of them on its command line (ConnectStandalone's documented form), so a restarted
worker runs the same connectors and resumes from its offsets file. `put_connector`
writes that file and, when the worker is up, applies the same config through the REST
API (PUT /connectors/<name>/config), so registering or replacing a connector needs no
restart. Connect reaches PostgreSQL and Kafka through the endpoints it is given, which
lets a stack route both through Toxiproxy links.

No connector config carries a password: the worker resolves `${file:...}` references
through Connect's FileConfigProvider, and the values live in `secrets/<connector>`
(mode 600, the stack user's), so neither the REST API (`GET /connectors?expand=info`)
nor the connector files hand the database's password to another local user. The
worker's own Kafka clients log in the same way: their SASL settings are references to
the stack's Kafka client.properties (KafkaCluster.client_properties, mode 600).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from driftlab.harness.history.waiting import because, wait_until
from driftlab.harness.lab.services import jvm
from driftlab.harness.lab.services.base import Endpoint, ServiceError
from driftlab.harness.lab.services.connect_tls import ConnectTls

# wait_slot_streaming is imported from here by benchmarks/cdc_latency_bench.py.
from driftlab.harness.lab.services.debezium import DebeziumPostgres, wait_slot_streaming
from driftlab.harness.lab.services.http_client import http_client
from driftlab.harness.lab.services.kafka import KafkaCluster
from driftlab.harness.lab.services.kafka_sasl import write_private_properties
from driftlab.harness.lab.services.ports import LOOPBACK, port_accepts
from driftlab.harness.lab.services.supervised import ProcessService, ServiceSpec
from driftlab.harness.lab.services.toxiproxy import ToxiproxyService


@dataclass(slots=True)
class ConnectSettings:
    """Worker choices; Kafka's defaults hold except where a comment says why."""

    heap: str = "512m"
    # How often source offsets (Debezium's LSN) are written to the offsets file. The
    # default is 60 s; after a kill -9 everything since the last flush is re-read from
    # the slot, so this bounds the duplicates a crash causes.
    offset_flush_interval_ms: int = 5000
    extra: dict[str, str] = field(default_factory=dict)


class Connector(Protocol):
    """What the worker registers: a name and a config (DebeziumPostgres, or a pipeline
    file's connector given as its config)."""

    @property
    def name(self) -> str:
        """The connector's name on the worker."""
        ...

    def config(self) -> dict[str, str]:
        """Its configuration, secrets in clear (the worker seals them)."""
        ...


KAFKA_LOGIN_KEYS = ("security.protocol", "sasl.mechanism", "sasl.jaas.config")
"""The worker's Kafka login settings, each read from the stack's client.properties."""

CLIENT_PREFIXES = ("", "producer.", "consumer.", "admin.")
"""The worker's own clients (top level) and those it makes for connectors' tasks and
topic creation, which do not inherit the top-level login."""


class ConnectService(ProcessService):
    """A standalone Connect worker: file offsets, REST on loopback, JSON without schemas.

    `kafka_login` writes and returns the stack's Kafka client.properties (see
    KafkaCluster.client_properties): called when the worker's config is written.
    """

    stop_timeout = 20.0

    def __init__(
        self,
        spec: ServiceSpec,
        kafka_bootstrap: str | Callable[[], str],
        kafka_login: Callable[[], Path],
        connectors: Iterable[Connector] = (),
        settings: ConnectSettings | None = None,
    ) -> None:
        super().__init__(spec)
        self._bootstrap = kafka_bootstrap
        self._kafka_login = kafka_login
        self.settings = settings or ConnectSettings()
        self._initial = list(connectors)

    @property
    def kafka_bootstrap(self) -> str:
        """Kafka's address for the worker (a callable given is asked on first use)."""
        if callable(self._bootstrap):
            self._bootstrap = self._bootstrap()
        return self._bootstrap

    # --- files -------------------------------------------------------------------------

    @property
    def offsets_path(self) -> Path:
        return self.spec.data_dir / "connect.offsets"

    @property
    def worker_path(self) -> Path:
        return self.spec.data_dir / "worker.properties"

    @property
    def connectors_dir(self) -> Path:
        return self.spec.data_dir / "connectors"

    def worker_properties(self) -> dict[str, object]:
        """The standalone worker's configuration."""
        port = self.spec.port()
        login = self._kafka_login()
        props: dict[str, object] = {
            "bootstrap.servers": self.kafka_bootstrap,
            # Kafka asks for the lab's login; the password stays in the login file.
            **{
                f"{prefix}{key}": f"${{file:{login}:{key}}}"
                for prefix in CLIENT_PREFIXES
                for key in KAFKA_LOGIN_KEYS
            },
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            # Plain JSON events; the schema envelope would triple every message.
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "offset.storage.file.filename": self.offsets_path,
            "offset.flush.interval.ms": self.settings.offset_flush_interval_ms,
            "plugin.path": self.spec.runtime.kafka_plugins(),
            # Plugins are found through their ServiceLoader manifests instead of a
            # reflective scan of ~110 jars: seconds less CPU at every start.
            "plugin.discovery": "service_load",
            # Connector configs name their secrets as ${file:PATH:KEY} (sealed_config).
            "config.providers": "file",
            "config.providers.file.class": (
                "org.apache.kafka.common.config.provider.FileConfigProvider"
            ),
            # HTTPS with client certificates: no other local user may use the API
            # (harness/lab/services/connect_tls.py).
            "listeners": f"https://{LOOPBACK}:{port}",
            "rest.advertised.listener": "https",
            "rest.advertised.host.name": LOOPBACK,
            "rest.advertised.port": port,
            **self.tls.worker_properties(),
        }
        props.update(self.settings.extra)
        return props

    def _connector_file(self, name: str) -> Path:
        return self.connectors_dir / f"{name}.properties"

    @property
    def secrets_dir(self) -> Path:
        return self.spec.data_dir / "secrets"

    def sealed_config(self, connector: Connector) -> dict[str, str]:
        """The connector's config with each secret replaced by a reference the worker
        resolves (FileConfigProvider), the values written to a file only the stack's
        user reads."""
        config = dict(connector.config())
        secrets = {k: v for k, v in config.items() if is_secret(k, v)}
        if not secrets:
            return config
        self.secrets_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.secrets_dir, 0o700)
        path = self.secrets_dir / f"{connector.name}.properties"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)
        jvm.write_properties(path, secrets)
        for key in secrets:
            config[key] = f"${{file:{path}:{key}}}"
        return config

    def _write_connector(self, config: Mapping[str, str], name: str) -> None:
        path = self._connector_file(name)
        jvm.write_properties(path, dict(config))
        os.chmod(path, 0o600)

    # --- ProcessService ----------------------------------------------------------------

    @property
    def tls(self) -> ConnectTls:
        """The REST API's keys and certificates (made by `prepare`)."""
        return ConnectTls(self.spec.data_dir / "tls", self.spec.secret("tls"))

    def prepare(self) -> None:
        """Write the worker config and the connectors given at construction."""
        self.spec.runtime.kafka_libs()  # missing jars are named now
        self.tls.ensure(self.spec.runtime, self.log_path)
        self.connectors_dir.mkdir(parents=True, exist_ok=True)
        # Mode 600: it holds the REST keystores' password.
        write_private_properties(self.worker_path, self.worker_properties())
        jvm.write_log4j(self.spec.data_dir / "log4j.properties")
        for connector in self._initial:
            self._write_connector(self.sealed_config(connector), connector.name)

    def command(self) -> list[str]:
        files = sorted(self.connectors_dir.glob("*.properties"))
        return jvm.java_argv(
            "org.apache.kafka.connect.cli.ConnectStandalone",
            [self.worker_path, *files],
            heap=self.settings.heap,
            log4j=self.spec.data_dir / "log4j.properties",
            tmp_dir=self.spec.data_dir / "tmp",
            runtime=self.spec.runtime,
        )

    def probe(self) -> bool:
        """The REST API answers, and every registered connector and task is RUNNING."""
        return self._rest_ready() and all(self._running(name) for name in self.registered())

    def answers(self) -> bool:
        """The REST API answers: the worker serves (its connectors' states are
        `broken`'s: a failed task is a worker that answers)."""
        try:
            return self._rest_ready()
        except (ServiceError, OSError, ValueError):
            return False

    def _rest_ready(self) -> bool:
        return port_accepts(self.spec.port()) and isinstance(self.rest("GET", "/connectors"), list)

    def wait_healthy(self, timeout: float = 90.0) -> None:
        """Block until the probe succeeds; a FAILED connector fails at once with its trace."""
        proc = self._require()
        deadline = time.monotonic() + timeout
        # Jetty listens before the REST resources exist (404 until the herder is up).
        proc.wait_until(self._rest_ready, timeout, "the REST API (GET /connectors)")
        for name in self.registered():
            self.wait_connector_running(name, max(1.0, deadline - time.monotonic()))
        self.after_healthy()

    def endpoint(self) -> Endpoint:
        """The REST API's address."""
        return Endpoint(LOOPBACK, self.spec.port(), {"url": self.rest_url})

    # --- connectors --------------------------------------------------------------------

    @property
    def rest_url(self) -> str:
        return f"https://{LOOPBACK}:{self.spec.port()}"

    def rest(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """One REST call; returns the decoded JSON (None for an empty answer)."""
        with http_client(10, verify=self.tls.client_context(), base_url=self.rest_url) as http:
            return rest_call(http, method, path, body, self.name)

    def registered(self) -> list[str]:
        """The connectors this worker starts with (its .properties files)."""
        return sorted(p.stem for p in self.connectors_dir.glob("*.properties"))

    def put_connector(self, connector: Connector, timeout: float = 60.0) -> None:
        """Register or replace a connector: applied now if the worker runs, kept for restarts.

        Connect validates the config first (Debezium logs in to PostgreSQL to do so); a
        rejected config raises and is not kept, so it cannot break the next start.
        """
        self.connectors_dir.mkdir(parents=True, exist_ok=True)
        config = self.sealed_config(connector)
        if self.is_running():
            self.rest("PUT", f"/connectors/{connector.name}/config", config)
        self._write_connector(config, connector.name)
        if self.is_running():
            self.wait_connector_running(connector.name, timeout)

    def delete_connector(self, name: str) -> None:
        """Unregister a connector (its slot and offsets stay: drop the slot yourself)."""
        self._connector_file(name).unlink(missing_ok=True)
        (self.secrets_dir / f"{name}.properties").unlink(missing_ok=True)
        if self.is_running():
            try:
                self.rest("DELETE", f"/connectors/{name}")
            except RestError as exc:
                if exc.status != 404:
                    raise

    def status(self, name: str) -> dict[str, Any]:
        """The connector's status document (GET /connectors/<name>/status)."""
        return self.rest("GET", f"/connectors/{name}/status")

    def _running(self, name: str) -> bool:
        return connector_running(self.status(name), self.name, name)

    def broken(self) -> str | None:
        """The first registered connector whose task (or itself) is FAILED, with its
        trace's first line; None while none is. A task that fails is not the worker
        dying: only the REST API shows it."""
        for name in self.registered():
            try:
                status = self.status(name)
            except (ServiceError, OSError, ValueError):
                continue  # not registered yet, or the worker is busy: the probes judge
            for task in status.get("tasks", ()):
                if task.get("state") == "FAILED":
                    return task_failed(name, task)
            connector = status.get("connector", {})
            if connector.get("state") == "FAILED":
                return task_failed(name, connector)
        return None

    def wait_connector_running(self, name: str, timeout: float = 60.0) -> None:
        """Block until the connector and its task run; a FAILED task raises at once."""
        proc = self._require()
        last: list[Exception] = []

        def running() -> bool:
            if not proc.is_running():
                raise proc.failure(f"exited before connector {name} was running")
            try:
                return self._running(name)
            except ConnectorFailed:
                raise
            except (ServiceError, OSError, KeyError) as exc:
                last[:] = [exc]  # not registered yet, or the worker is still starting
                return False

        if not wait_until(running, timeout, 0.25):
            raise proc.failure(f"connector {name} not RUNNING after {timeout:.0f}s{because(last)}")


def rest_call(
    http: httpx.Client, method: str, path: str, body: Mapping[str, Any] | None, who: str
) -> Any:
    """One JSON call to the Connect REST API `http` speaks to: the decoded answer (None
    when empty); an HTTP error status raises RestError naming `who`, no answer at all
    ServiceError."""
    try:
        answer = http.request(method, path, json=body, headers={"Accept": "application/json"})
    except httpx.TransportError as exc:
        raise ServiceError(f"{who}: {method} {path}: {exc}") from exc
    if answer.is_error:
        code = answer.status_code
        raise RestError(f"{who}: {method} {path} answered {code}: {answer.text}", code)
    return answer.json() if answer.content else None


def connector_running(status: Mapping[str, Any], worker: str, name: str) -> bool:
    """Whether connector `name` and all its tasks are RUNNING by its status document; a
    task that FAILED raises ConnectorFailed (named for `worker`) with its trace."""
    states = [status["connector"]["state"]] + [t["state"] for t in status["tasks"]]
    for task in status["tasks"]:
        if task["state"] == "FAILED":
            trace = task.get("trace") or "(no trace)"
            raise ConnectorFailed(f"{worker}: {task_failed(name, task)}\n{trace}")
    return bool(status["tasks"]) and all(s == "RUNNING" for s in states)


def task_failed(connector: str, state: Mapping[str, Any]) -> str:
    """One line: which task of the connector (or the connector itself, whose status
    has no task id) FAILED, and its trace's first line."""
    trace = str(state.get("trace") or "").strip()
    first = trace.splitlines()[0][:300] if trace else "no trace"
    who = f"task {state['id']} of connector" if "id" in state else "connector"
    return f"{who} {connector} FAILED ({first})"


def connect_from_deps(spec: ServiceSpec, deps: Mapping[str, object]) -> ConnectService:
    """The stack's Connect worker, reaching Kafka through the link "connect->kafka".

    Connectors come from the setups (`put_connector`), with a PostgreSQL endpoint that
    is usually `stack.link("connect", "postgres")`.
    """
    kafka, toxiproxy = deps["kafka"], deps["toxiproxy"]
    if not isinstance(kafka, KafkaCluster) or not isinstance(toxiproxy, ToxiproxyService):
        raise ServiceError("connect needs the stack's kafka and toxiproxy services")
    # Made when the worker starts: `driftlab down` attaches to stacks whose Toxiproxy is
    # dead (a SIGKILLed owner), and asking it for a link failed the whole command.
    return ConnectService(
        spec, lambda: kafka.link(toxiproxy.client(), "connect"), kafka.client_properties
    )


def is_secret(key: str, value: str) -> bool:
    """Whether a connector config entry holds a secret sealed_config moves to a file:
    a `password` or `*.password` key (database.password, connection.password) whose
    value is not already a `${provider:...}` reference."""
    return key.rsplit(".", 1)[-1].lower() == "password" and not value.startswith("${")


class RestError(ServiceError):
    """The Connect REST API answered with an error status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ConnectorFailed(ServiceError):
    """A connector's task reported FAILED; the message carries its stack trace."""


__all__ = [
    "ConnectService",
    "ConnectorFailed",
    "DebeziumPostgres",
    "RestError",
    "connect_from_deps",
    "wait_slot_streaming",
]
