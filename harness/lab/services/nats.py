"""NATS with JetStream, as the lab's streaming broker with a replayable log."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from driftlab.harness.lab.services.base import Endpoint, ServiceError
from driftlab.harness.lab.services.ports import LOOPBACK
from driftlab.harness.lab.services.supervised import ProcessService, write_private

USER = "driftlab"


class NatsService(ProcessService):
    """nats-server with JetStream on loopback, a user and generated password.

    Monitoring stays off. The configuration is a file (mode 600) so the password is not
    on the command line.
    """

    @property
    def config_path(self) -> Path:
        return self.spec.data_dir / "nats.conf"

    def prepare(self) -> None:
        self.spec.runtime.binary("nats-server")  # a missing program is named now
        store = self.spec.data_dir / "jetstream"
        store.mkdir(parents=True, exist_ok=True)
        # json.dumps gives NATS-config-compatible quoted strings.
        config = "\n".join(
            [
                f"server_name: {json.dumps('driftlab-' + self.spec.secret('server_id')[:8])}",
                f"listen: {json.dumps(f'{LOOPBACK}:{self.spec.port()}')}",
                f"jetstream {{ store_dir: {json.dumps(str(store))} }}",
                "authorization {",
                f"  user: {json.dumps(USER)}",
                f"  password: {json.dumps(self.spec.secret())}",
                "}",
                "",
            ]
        )
        write_private(self.config_path, config)

    def command(self) -> list[str]:
        return [self.spec.runtime.binary("nats-server"), "-c", str(self.config_path)]

    def endpoint(self) -> Endpoint:
        return Endpoint(LOOPBACK, self.spec.port(), {"user": USER, "password": self.spec.secret()})

    def probe(self) -> bool:
        # The protocol is text: INFO on connect, then CONNECT + PING must earn a PONG
        # (a wrong password earns -ERR). nats-py is asyncio-only; this stays synchronous.
        with socket.create_connection((LOOPBACK, self.spec.port()), timeout=2) as sock:
            stream = sock.makefile("rwb")
            if not stream.readline().startswith(b"INFO "):
                return False
            connect = {"user": USER, "pass": self.spec.secret(), "verbose": False}
            stream.write(f"CONNECT {json.dumps(connect)}\r\nPING\r\n".encode())
            stream.flush()
            reply = stream.readline()
            if reply.startswith(b"-ERR"):
                raise ServiceError(f"nats refused the probe: {reply.decode().strip()}")
            return reply.startswith(b"PONG")
