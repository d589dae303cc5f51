"""The CDC consumers as the harness sees them: one supervised OS process each
(consumer.py), and the group of them that faults on `consumer` act on."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from driftlab.harness.lab.services.base import Endpoint, HoldsWhenBusy, ServiceGroup
from driftlab.harness.lab.services.command import CommandProcess
from driftlab.scenarios.architectures.cdc import consumer as cdc_consumer
from driftlab.scenarios.architectures.cdc.protocol import CONFIG_ENV, ConsumerConfig

CONSUMER = "consumer"
"""The fault target naming every consumer process at once."""


class ConsumerProcess(HoldsWhenBusy, CommandProcess):
    """One consumer OS process, which the nemesis can SIGKILL, pause and restart.

    Each start is a new instance `<name>#<n>` (the history `process`); `wait_healthy`
    waits until that instance has taken its partitions. A `when: busy` crash holds it
    frozen inside uncommitted work (HoldsWhenBusy).
    """

    def __init__(self, name: str, config: ConsumerConfig, log_dir: Path) -> None:
        super().__init__(
            name,
            # Run as a script (-P: its folder stays off sys.path) rather than with -m,
            # which would import the whole driftlab.harness.lab.setups package first.
            [sys.executable, "-P", cdc_consumer.__file__],
            log_dir / f"{name}.log",
            cwd=Path(config.run_dir),
            stop_timeout=10.0,
            before_start=self._configure,
            instance_format="{name}#{n}",
        )
        self.config = config
        self.status_path = Path(config.status_path)

    def _configure(self, instance: str) -> None:
        """The new instance's configuration; it resumes from its group's committed
        offsets."""
        cfg = dict(self.config.__dict__, instance=instance)
        self.env = {**os.environ, CONFIG_ENV: json.dumps(cfg)}

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
        """Whether a crash now would cut work short: this instance is applying a batch
        it has received (with commit before apply, already committed), or holds applied
        changes it has not committed yet (commit after apply), which its group then
        receives again. Between a batch and the next commit the consumer is idle but
        not done: a crash there is the one that makes redelivery. While an offset
        commit is under way it is not busy: Kafka may already hold offsets its status
        does not, and what it applied would not come back. It publishes `committing`
        before an offset commit leaves, so a frozen instance seen busy has not sent one
        (HoldsWhenBusy)."""
        status = self.status()
        if status.get("committing"):
            return False
        committed = status.get("committed") or {}
        ahead = any(o > committed.get(p, -1) for p, o in (status.get("position") or {}).items())
        return bool(status.get("in_flight")) or ahead

    def endpoint(self) -> Endpoint:
        """Where it reads from: its Kafka link."""
        bootstrap = self.config.kafka["bootstrap.servers"]
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        return Endpoint(host, int(port), {"instance": self.instance})


class ConsumerGroup(ServiceGroup[ConsumerProcess]):
    """Every consumer process at once, as the fault target `consumer`."""

    def __init__(self, members: list[ConsumerProcess]) -> None:
        super().__init__(CONSUMER, members)
