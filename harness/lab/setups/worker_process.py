"""A setup's own worker process (a consumer, a projector, a receiver) as a Service.

The work-queue, direct-messaging and event-sourced setups run their consumers as OS
processes, `python -m <module>`, so that a crash fault is a real SIGKILL: what the
process held in memory (unacked messages, a half-applied batch) is gone. Wrapping one
in `driftlab.harness.lab.services.base.Service` lets the nemesis crash, pause and restart it like
any server (see `Setup.process`).

Each start is a new *instance*: `<name>-i<n>`, the history `process` of everything it
records, passed with the rest of its configuration as JSON in `$DRIFTLAB_WORKER`. The
worker says it is ready, and publishes figures the parent reads (how far it got), by
atomically replacing its status file.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any, Protocol

from driftlab.harness.history import exitcodes
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.command import CommandProcess

CONFIG_ENV = "DRIFTLAB_WORKER"


class WorkerProcess(CommandProcess):
    """One worker of a setup, `python -m module`, restartable under a new instance name
    each time: a CommandProcess whose configuration (with the instance's name) is JSON
    in `$DRIFTLAB_WORKER` and whose readiness is its first status."""

    def __init__(
        self, name: str, module: str, config: dict[str, Any], run_dir: Path, status_dir: Path
    ) -> None:
        super().__init__(
            name,
            [sys.executable, "-m", module],
            RunDir(run_dir).log(f"{name}.log"),
            before_start=self._configure,
        )
        self.module = module
        self.config = config
        self.run_dir = run_dir
        self.status_path = status_dir / f"{name}.status.json"

    def _configure(self, instance: str) -> None:
        """The new instance's environment; the previous instance's status removed."""
        self.status_path.unlink(missing_ok=True)
        config = {
            **self.config,
            "name": self.name,
            "instance": instance,
            "run_dir": str(self.run_dir),
            "status_path": str(self.status_path),
        }
        self.env = {**os.environ, CONFIG_ENV: json.dumps(config)}

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Block until this instance has written its first status (it is consuming)."""
        proc = self._require()

        def ready() -> bool:
            return self.status().get("instance") == self.instance

        proc.wait_until(ready, timeout, f"{self.instance} to report ready")

    def status(self) -> dict[str, Any]:
        """The latest status the running instance published ({} before the first)."""
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}

    def endpoint(self) -> Endpoint:
        """Where the worker listens, if it does (`port` in its configuration)."""
        return Endpoint("127.0.0.1", int(self.config.get("port", 0)))


def worker_config(
    env: str = CONFIG_ENV, starter: str = "driftlab.harness.lab.setups.worker_process.WorkerProcess"
) -> dict[str, Any]:
    """In the worker: its configuration (JSON in `$env`), or exit with a message saying
    who starts it (`starter`)."""
    raw = os.environ.get(env)
    if not raw:
        print(
            f"${env} is not set: this module is a worker that a driftlab setup "
            f"starts ({starter}), not a command",
            file=sys.stderr,
        )
        raise SystemExit(exitcodes.BAD_INPUT)
    return json.loads(raw)


class Stoppable(Protocol):
    """A worker's main loop: `run` returns once `stopping` is set."""

    stopping: bool

    def run(self) -> None:
        """Work until `stopping` is set."""
        ...


def worker_logging() -> None:
    """In the worker: log to stderr, which its parent writes to the service's log."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def run_until_sigterm(worker: Stoppable) -> int:
    """In the worker: run `worker` until SIGTERM (a graceful stop) sets its `stopping`."""

    def stop(_signum: int, _frame: object) -> None:
        worker.stopping = True

    signal.signal(signal.SIGTERM, stop)
    worker.run()
    return 0


def publish_status(path: str, status: dict[str, Any]) -> None:
    """In the worker: atomically replace the status file the parent reads."""
    target = Path(path)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(status))
    os.replace(tmp, target)
