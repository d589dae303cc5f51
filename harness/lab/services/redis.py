"""Redis with an append-only file, as the lab's cache."""

from __future__ import annotations

from pathlib import Path

import redis

from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.ports import LOOPBACK
from driftlab.harness.lab.services.supervised import ProcessService, write_private


class RedisService(ProcessService):
    """redis-server on loopback with `appendonly yes` and a generated password.

    The configuration lives in a file (mode 600) so the password is not on the command
    line for every `ps` to read.
    """

    @property
    def config_path(self) -> Path:
        return self.spec.data_dir / "redis.conf"

    def prepare(self) -> None:
        self.spec.runtime.binary("redis-server")  # a missing program is named now
        self.spec.data_dir.mkdir(parents=True, exist_ok=True)
        config = "\n".join(
            [
                f"bind {LOOPBACK}",
                f"port {self.spec.port()}",
                "protected-mode yes",
                "daemonize no",
                f'dir "{self.spec.data_dir}"',
                "appendonly yes",
                "appendfsync everysec",
                'save ""',
                f"requirepass {self.spec.secret()}",
                'logfile ""',
                "",
            ]
        )
        write_private(self.config_path, config)

    def command(self) -> list[str]:
        return [self.spec.runtime.binary("redis-server"), str(self.config_path)]

    def endpoint(self) -> Endpoint:
        return Endpoint(LOOPBACK, self.spec.port(), {"password": self.spec.secret()})

    def client(self) -> redis.Redis:
        """A client of the server itself (not through a link)."""
        return redis.Redis(
            host=LOOPBACK,
            port=self.spec.port(),
            password=self.spec.secret(),
            socket_timeout=2,
            socket_connect_timeout=2,
        )

    def probe(self) -> bool:
        with self.client() as client:
            return bool(client.ping())
