"""Kafka closed to other local users: every listener asks for a password.

Every local user can reach a loopback port, so the broker's client listeners (its own,
and the LINKn ones Toxiproxy forwards to) take SASL_PLAINTEXT with SCRAM-SHA-256 for one
user, `driftlab`, whose password is the stack's secret; brokers talk to each other as
that user too. The controller listener takes SASL PLAIN with a static JAAS user of its
own: Kafka (3.9) does not offer SCRAM between controllers, whose credentials must exist
before the metadata log that holds SCRAM users is read (KIP-900).

The SCRAM user is written into the metadata log when the storage is formatted
(`kafka-storage format --add-scram`). Both passwords stay off command lines, which any
local user can read in /proc: the format's arguments go through a java @argfile, and
server.properties, the argfile and the clients' properties file are mode 600.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftlab.harness.lab.services import jvm

MECHANISM = "SCRAM-SHA-256"
PROTOCOL = "SASL_PLAINTEXT"
USERNAME = "driftlab"
CONTROLLER_USER = "controller"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass(frozen=True, slots=True)
class KafkaLogin:
    """The lab's Kafka user: what every client of the stack's Kafka presents."""

    password: str
    username: str = USERNAME
    mechanism: str = MECHANISM
    security_protocol: str = PROTOCOL

    def client_config(self, bootstrap: str, **extra: Any) -> dict[str, Any]:
        """A librdkafka (confluent-kafka) client config for `bootstrap`, logged in."""
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": self.security_protocol,
            "sasl.mechanism": self.mechanism,
            "sasl.username": self.username,
            "sasl.password": self.password,
            **extra,
        }

    def jaas(self) -> str:
        """The Java clients' `sasl.jaas.config` (the password is hex: no quoting)."""
        return f'{SCRAM_MODULE} required username="{self.username}" password="{self.password}";'

    def java_properties(self) -> dict[str, str]:
        """A Java client's login settings (Connect's worker, a user's JVM process)."""
        return {
            "security.protocol": self.security_protocol,
            "sasl.mechanism": self.mechanism,
            "sasl.jaas.config": self.jaas(),
        }

    def scram_credential(self) -> str:
        """The `--add-scram` argument of `kafka-storage format` that creates the user."""
        return f"{self.mechanism}=[name={self.username},password={self.password}]"


def server_properties(
    login: KafkaLogin, controller_password: str, client_listeners: Iterable[str]
) -> dict[str, str]:
    """A node's SASL settings: SCRAM on `client_listeners` (their names, the
    inter-broker one among them), PLAIN on the controller listener `CONTROLLER`."""
    plain = (
        f'{PLAIN_MODULE} required username="{CONTROLLER_USER}" '
        f'password="{controller_password}" user_{CONTROLLER_USER}="{controller_password}";'
    )
    scram = login.mechanism.lower()
    props = {
        "sasl.enabled.mechanisms": login.mechanism,
        "sasl.mechanism.inter.broker.protocol": login.mechanism,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": plain,
    }
    for name in client_listeners:
        # The broker's own login (as an inter-broker client); the server side of SCRAM
        # reads the users from the metadata log.
        props[f"listener.name.{name.lower()}.{scram}.sasl.jaas.config"] = login.jaas()
    return props


def write_private_properties(path: Path, props: Mapping[str, object]) -> Path:
    """A .properties file that holds a password: mode 600 from its creation, whatever
    the umask, and again if it existed with another mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    os.close(fd)
    return jvm.write_properties(path, props)


def write_argfile(path: Path, args: Iterable[str | Path]) -> Path:
    """A java @argfile (mode 600) holding `args`, one per line, so that a password among
    them never shows on the command line. Each argument is quoted as the launcher reads
    it back."""
    lines = []
    for arg in map(str, args):
        escaped = arg.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'"{escaped}"')
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")
    return path
