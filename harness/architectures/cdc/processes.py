"""The CDC consumers as the harness sees them: one supervised OS process each
(consumer.py), and the group of them that faults on `consumer` act on."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.architectures.cdc import consumer as cdc_consumer
from harness.architectures.cdc.protocol import CONFIG_ENV, ConsumerConfig
from harness.services.base import Endpoint, ServiceError, ServiceGroup
from harness.services.process import SupervisedProcess
from harness.services.supervised import SupervisedService

CONSUMER = "consumer"
"""The fault target naming every consumer process at once."""


class ConsumerProcess(SupervisedService):
    """One consumer OS process, which the nemesis can SIGKILL, pause and restart.

    Each start is a new instance `<name>#<n>` (the history `process`); `wait_healthy`
    waits until that instance has taken its partitions.
    """

    def __init__(self, name: str, config: ConsumerConfig, log_dir: Path) -> None:
        self.name = name
        self.config = config
        self.log_path = log_dir / f"{name}.log"
        self.status_path = Path(config.status_path)
        self.starts = 0
        self.instance = ""

    def start(self) -> None:
        """Launch a new instance (it resumes from its group's committed offsets)."""
        if self.is_running():
            raise ServiceError(f"{self.name}: already running")
        self.starts += 1
        self.instance = f"{self.name}#{self.starts}"
        cfg = dict(self.config.__dict__, instance=self.instance)
        env = {**os.environ, CONFIG_ENV: json.dumps(cfg)}
        self.process = SupervisedProcess(
            self.name,
            # Run as a script (-P: its folder stays off sys.path) rather than with -m,
            # which would import the whole harness.setups package first.
            [sys.executable, "-P", cdc_consumer.__file__],
            self.log_path,
            env=env,
            cwd=Path(self.config.run_dir),
            die_with_parent=True,
            stop_timeout=10.0,
        )
        self.process.start()

    def status(self) -> dict[str, Any]:
        """The instance's last published status ({} before it published any)."""
        try:
            status = json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}
        return status if status.get("instance") == self.instance else {}

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Block until this instance has its partitions assigned."""
        proc = self._require()
        proc.wait_until(lambda: self.status().get("ready"), timeout, "its partitions")

    def busy(self) -> bool:
        """Whether this instance is applying a batch it has received (and, with
        commit before apply, already committed)."""
        return bool(self.status().get("in_flight"))

    def endpoint(self) -> Endpoint:
        """Where it reads from: its Kafka link."""
        host, port = self.config.bootstrap.split(",")[0].rsplit(":", 1)
        return Endpoint(host, int(port), {"instance": self.instance})


class ConsumerGroup(ServiceGroup[ConsumerProcess]):
    """Every consumer process at once, as the fault target `consumer`."""

    def __init__(self, members: list[ConsumerProcess]) -> None:
        super().__init__(CONSUMER, members)
