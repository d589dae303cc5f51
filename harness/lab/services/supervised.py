"""A service of the stack as one supervised process at a time: what it is given
(`ServiceSpec`: folders, ports, secrets, runtime) and the `Service` built on it."""

from __future__ import annotations

import os
import secrets
import signal
from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftlab.harness.lab.services.base import Service, ServiceError
from driftlab.harness.lab.services.ports import free_port
from driftlab.harness.lab.services.process import ProcessRecord, SupervisedProcess
from driftlab.harness.lab.services.runtime import LocalRuntime, Runtime


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read: a config that holds a password."""
    path.write_text(text)
    os.chmod(path, 0o600)


@dataclass
class ServiceSpec:
    """What one service of a stack is given: its folders, ports and secrets, and the
    runtime its programs run on.

    Ports and secrets are drawn on first use and kept in the stack's state file, so a
    restarted or adopted service has the same address and password. The runtime is
    the stack's choice and is not saved (the stack that reads the file sets it).
    """

    name: str
    root: Path  # the stack's folder
    ports: dict[str, int] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    die_with_parent: bool = False
    runtime: Runtime = field(default_factory=LocalRuntime, compare=False, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.root / "data" / self.name

    @property
    def log_path(self) -> Path:
        return self.root / "logs" / f"{self.name}.log"

    def port(self, key: str = "main") -> int:
        """The service's port named `key`, drawn once."""
        if key not in self.ports:
            self.ports[key] = free_port()
        return self.ports[key]

    def secret(self, key: str = "password") -> str:
        """A generated secret named `key` (hex: safe in URLs and config files)."""
        if key not in self.secrets:
            self.secrets[key] = secrets.token_hex(16)
        return self.secrets[key]

    def to_json(self) -> dict[str, Any]:
        return {
            "ports": dict(self.ports),
            "secrets": dict(self.secrets),
            "die_with_parent": self.die_with_parent,
        }

    @classmethod
    def from_json(cls, name: str, root: Path, data: Mapping[str, Any]) -> ServiceSpec:
        return cls(
            name,
            root,
            dict(data.get("ports", {})),
            dict(data.get("secrets", {})),
            bool(data.get("die_with_parent", False)),
        )


class SupervisedService(Service):
    """A Service that is one SupervisedProcess at a time: `self.process`, None until the
    first start. Stopping, killing, pausing and resuming act on that process."""

    name: str
    process: SupervisedProcess | None = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers (nothing when it never started)."""
        if self.process is not None:
            self.process.stop()

    def kill(self) -> None:
        """SIGKILL the process group: the crash a fault injects."""
        self._require().kill()

    def pause(self) -> None:
        self._require().pause()

    def resume(self) -> None:
        self._require().resume()

    def is_running(self) -> bool:
        return self.process is not None and self.process.is_running()

    def _require(self) -> SupervisedProcess:
        if self.process is None:
            raise ServiceError(f"{self.name}: not started")
        return self.process


class ProcessService(SupervisedService):
    """A Service run as one supervised process group on this machine.

    Subclasses say how to prepare the data folder (`prepare`, idempotent: a restart
    keeps the data), which command to run (`command`, `environment`), what a real
    client round trip is (`probe`) and what to do once it first succeeds
    (`after_healthy`). `on_launch` is called with each new process record, so the
    stack can write its state file before the service is even ready.
    """

    stop_signal: int = signal.SIGTERM
    stop_timeout: float = 15.0
    run_as: str | None = None

    def __init__(self, spec: ServiceSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.log_path = spec.log_path
        self.process: SupervisedProcess | None = None
        self.on_launch: Callable[[ServiceSpec], None] | None = None

    # --- what subclasses provide -------------------------------------------------------

    def prepare(self) -> None:
        """Create folders and configuration; must keep existing data."""
        self.spec.data_dir.mkdir(parents=True, exist_ok=True)

    @abstractmethod
    def command(self) -> list[str]:
        """The argv of the server, running in the foreground."""

    def environment(self) -> dict[str, str] | None:
        """The server's environment (None: inherit the harness's)."""
        return None

    @abstractmethod
    def probe(self) -> bool:
        """One real client round trip; raises or returns False while not ready."""

    def after_healthy(self) -> None:
        """Runs once the probe succeeds (create the lab database, ...)."""

    def bound_ports(self) -> dict[str, int]:
        """The ports a start of this service binds, by role, which must be free first:
        all of its spec's, unless a subclass knows some are another program's (the
        Toxiproxy listeners Kafka advertises) or a helper's still serving (epmd)."""
        return dict(self.spec.ports)

    # --- the Service interface ---------------------------------------------------------

    def _new_process(self) -> SupervisedProcess:
        return self.spec.runtime.process(
            self.name,
            self.command(),
            self.log_path,
            env=self.environment(),
            cwd=self.spec.data_dir,
            user=self.run_as,
            die_with_parent=self.spec.die_with_parent,
            stop_signal=self.stop_signal,
            stop_timeout=self.stop_timeout,
        )

    def start(self) -> None:
        if self.is_running():
            raise ServiceError(f"{self.name}: already running (pid {self._require().pid})")
        self.prepare()
        self.process = self._new_process()
        self.process.start()
        if self.on_launch is not None:
            self.on_launch(self.spec)

    def adopt(self, records: Mapping[str, ProcessRecord]) -> None:
        """Take over the processes (by role, as `records` gave them) another harness started."""
        if "main" in records:
            self.process = self.spec.runtime.adopt(
                self.name,
                records["main"],
                stop_signal=self.stop_signal,
                stop_timeout=self.stop_timeout,
            )

    def records(self) -> dict[str, ProcessRecord]:
        """The live processes of this service by role, for the state file."""
        if self.process is None or self.process.record is None:
            return {}
        return {"main": self.process.record}

    def wait_healthy(self, timeout: float = 60.0) -> None:
        self._require().wait_until(self.probe, timeout, f"a {self.name} client round trip")
        self.after_healthy()

    def healthy(self) -> bool:
        """One probe, without waiting: True if a client round trip succeeds now."""
        try:
            return bool(self.probe())
        except Exception:  # any client error means unhealthy
            return False

    def answers(self) -> bool:
        """The probe, once (the watchdog's question)."""
        return self.healthy()
