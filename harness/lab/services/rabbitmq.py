"""RabbitMQ, as the lab's AMQP broker (acks, redelivery, no replayable log)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pika

from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.ports import LOOPBACK
from driftlab.harness.lab.services.process import ProcessRecord, SupervisedProcess
from driftlab.harness.lab.services.supervised import ProcessService, ServiceSpec, write_private

USER = "driftlab"


class RabbitMQService(ProcessService):
    """A RabbitMQ node of its own: unique node name, folders, ports and credentials.

    Erlang's port mapper (epmd) would otherwise be spawned by the node as a daemon that
    escapes the node's process group and outlives it; so the service starts its own
    epmd on a private port first, in a group of its own, and stops it with the node.
    """

    stop_timeout = 30.0

    def __init__(self, spec: ServiceSpec) -> None:
        super().__init__(spec)
        self.epmd: SupervisedProcess | None = None

    @property
    def node_name(self) -> str:
        return f"driftlab-{self.spec.secret('node_id')[:10]}@localhost"

    @property
    def config_base(self) -> Path:
        return self.spec.data_dir / "rabbitmq"  # RabbitMQ appends ".conf"

    def prepare(self) -> None:
        # Missing programs are named now, not in a log after a failed start.
        self.spec.runtime.binary("rabbitmq-server")
        self.spec.runtime.binary("epmd")
        for folder in ("mnesia", "home", "log"):
            (self.spec.data_dir / folder).mkdir(parents=True, exist_ok=True)
        config = "\n".join(
            [
                f"listeners.tcp.default = {LOOPBACK}:{self.spec.port()}",
                f"default_user = {USER}",
                f"default_pass = {self.spec.secret()}",
                "loopback_users = none",
                "log.console = true",
                "log.console.level = info",
                "log.file = false",
                # A shared CI disk must not trip the free-space alarm that blocks publishers.
                "disk_free_limit.absolute = 50MB",
                "",
            ]
        )
        conf = self.config_base.with_suffix(".conf")
        write_private(conf, config)
        (self.spec.data_dir / "enabled_plugins").write_text("[].\n")

    def environment(self) -> dict[str, str]:
        data = self.spec.data_dir
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": str(data / "home"),  # the Erlang cookie lives here
            "RABBITMQ_NODENAME": self.node_name,
            "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
            "RABBITMQ_NODE_PORT": str(self.spec.port()),
            "RABBITMQ_DIST_PORT": str(self.spec.port("dist")),
            # Erlang distribution listens on every interface unless told otherwise.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_PORT": str(self.spec.port("epmd")),
            "ERL_EPMD_ADDRESS": LOOPBACK,
            "RABBITMQ_CONFIG_FILE": str(self.config_base),
            "RABBITMQ_CONF_ENV_FILE": str(data / "rabbitmq-env.conf"),  # none: ignore /etc
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(data / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(data / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(data / "mnesia"),
            "RABBITMQ_LOG_BASE": str(data / "log"),
            "RABBITMQ_LOGS": "-",
            "RABBITMQ_PID_FILE": str(data / "rabbitmq.pid"),
            # The script then execs the Erlang VM instead of running it as a child and
            # forwarding signals: the pid the stack records and signals is beam.smp's
            # (a SIGKILL to the wrapper left the broker serving, orphaned). The VM
            # itself stops gracefully on SIGTERM.
            "RUNNING_UNDER_SYSTEMD": "1",
        }

    def command(self) -> list[str]:
        return [self.spec.runtime.binary("rabbitmq-server")]

    def start(self) -> None:
        self.prepare()
        if self.epmd is None or not self.epmd.is_running():
            self.epmd = self.spec.runtime.process(
                f"{self.name}-epmd",
                [
                    self.spec.runtime.binary("epmd"),
                    "-address",
                    LOOPBACK,
                    "-port",
                    str(self.spec.port("epmd")),
                ],
                self.spec.root / "logs" / f"{self.name}-epmd.log",
                die_with_parent=self.spec.die_with_parent,
            )
            self.epmd.start()
            self.epmd.wait_for_port(self.spec.port("epmd"), timeout=10)
        super().start()

    def bound_ports(self) -> dict[str, int]:
        """Its ports, but epmd's while its own epmd still serves (a start reuses it)."""
        ports = dict(self.spec.ports)
        if self.epmd is not None and self.epmd.is_running():
            ports.pop("epmd", None)
        return ports

    def records(self) -> dict[str, ProcessRecord]:
        records = super().records()
        if self.epmd is not None and self.epmd.record is not None:
            records["epmd"] = self.epmd.record
        return records

    def adopt(self, records: Mapping[str, ProcessRecord]) -> None:
        super().adopt(records)
        if "epmd" in records:
            self.epmd = self.spec.runtime.adopt(f"{self.name}-epmd", records["epmd"])

    def stop(self) -> None:
        super().stop()
        if self.epmd is not None:
            self.epmd.stop(timeout=5)

    def endpoint(self) -> Endpoint:
        return Endpoint(
            LOOPBACK, self.spec.port(), {"user": USER, "password": self.spec.secret(), "vhost": "/"}
        )

    def connection_parameters(self) -> pika.ConnectionParameters:
        """pika parameters for the broker itself (not through a link)."""
        return pika.ConnectionParameters(
            host=LOOPBACK,
            port=self.spec.port(),
            credentials=pika.PlainCredentials(USER, self.spec.secret()),
            connection_attempts=1,
            socket_timeout=3,
            blocked_connection_timeout=5,
        )

    def probe(self) -> bool:
        connection = pika.BlockingConnection(self.connection_parameters())
        try:
            return connection.channel().is_open
        finally:
            connection.close()
