"""Any command line as a supervised, restartable Service: a binary, a jar, a script.

`CommandProcess` runs an argv list with its own environment and folder, in a process
group of its own, its output appended to a log in the run folder. The nemesis crashes
it (SIGKILL of the whole group), pauses it (SIGSTOP/SIGCONT) and restarts it like any
server of the stack. Each start is a new *instance*, `<name>-i<n>`.

Readiness is what the process shows from outside (`Readiness`): a TCP port that
accepts, an HTTP URL that answers 2xx, or a line in its log written by this instance;
the lab's own Python workers add their status file (driftlab.harness.lab.setups.worker_process).
"""

from __future__ import annotations

import re
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from driftlab.harness.lab.services.base import Endpoint, ServiceError
from driftlab.harness.lab.services.http_client import http_client
from driftlab.harness.lab.services.process import HARNESS_NOTE, SupervisedProcess
from driftlab.harness.lab.services.supervised import SupervisedService


@dataclass(frozen=True)
class Readiness:
    """How to tell a started process is ready: at most one of `tcp` (a port on
    127.0.0.1 accepts), `http` (a GET answers 2xx) and `log` (a regular expression
    found in what this instance logged); none: ready once launched."""

    tcp: int | None = None
    http: str | None = None
    log: str | None = None

    def describe(self) -> str:
        """What is awaited, for error messages."""
        if self.tcp is not None:
            return f"a listener on 127.0.0.1:{self.tcp}"
        if self.http is not None:
            return f"a 2xx answer from {self.http}"
        if self.log is not None:
            return f"the log line /{self.log}/"
        return "its launch"


def tcp_accepts(port: int, host: str = "127.0.0.1") -> bool:
    """Whether `host:port` accepts a TCP connection now."""
    with socket.create_connection((host, port), timeout=1.0):
        return True


def http_ok(url: str, http: httpx.Client) -> bool:
    """Whether a GET of `url` answers 2xx now (after any redirects)."""
    return http.get(url).is_success


def logged_line_matches(pattern: re.Pattern[str], text: str) -> bool:
    """Whether one line of `text` that the process printed (not a note of the harness's,
    which quotes the command line) matches `pattern`; a last line without its newline
    counts, as a process may print its ready line without one."""
    return any(
        pattern.search(line) for line in text.splitlines() if not line.startswith(HARNESS_NOTE)
    )


@dataclass(eq=False)  # a service is compared and hashed by identity
class CommandProcess(SupervisedService):
    """One command line, restartable: `argv` run in `cwd` with `env` (None: the
    harness's), logging to `log_path`. `stop_timeout` is how long a graceful stop waits
    for SIGTERM to work before it SIGKILLs the group."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    ready: Readiness = field(default_factory=Readiness)
    ready_timeout: float = 30.0  # how long a start may take to be ready (restarts too)
    die_with_parent: bool = True
    stop_timeout: float = 5.0
    before_start: Callable[[str], None] | None = None  # called with each new instance
    on_ready: Callable[[str], None] | None = None  # called once each instance is ready
    instance_format: str = "{name}-i{n}"  # the history `process` of the n-th start
    process: SupervisedProcess | None = field(default=None, init=False)
    instances: int = field(default=0, init=False)
    instance: str = field(default="", init=False)
    _log_offset: int = field(default=0, init=False)

    def start(self) -> None:
        """Launch a new instance (`<name>-i<n>` by default)."""
        if self.is_running():
            raise ServiceError(f"{self.name}: already running as {self.instance}")
        self.instances += 1
        self.instance = self.instance_format.format(name=self.name, n=self.instances)
        if self.before_start is not None:
            self.before_start(self.instance)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.process = self._new_process()
        self.process.start()

    def _new_process(self) -> SupervisedProcess:
        """The process of the instance being started: a command on this machine."""
        return SupervisedProcess(
            self.instance,
            list(self.argv),
            self.log_path,
            env=self.env,
            cwd=self.cwd,
            die_with_parent=self.die_with_parent,
            stop_signal=signal.SIGTERM,
            stop_timeout=self.stop_timeout,
        )

    def wait_healthy(self, timeout: float | None = None) -> None:
        """Block until this instance is ready (its Readiness) within `timeout` (default
        `ready_timeout`), or raise ServiceError quoting its log when it exits first or
        the time runs out."""
        proc = self._require()
        timeout = self.ready_timeout if timeout is None else timeout
        r = self.ready
        probe: Callable[[], object]
        if r.tcp is not None:
            port = r.tcp
            probe = lambda: tcp_accepts(port)  # noqa: E731
        elif r.http is not None:
            url, http = r.http, http_client(2.0, follow_redirects=True)
            probe = lambda: http_ok(url, http)  # noqa: E731
        elif r.log is not None:
            pattern = re.compile(r.log)
            probe = lambda: logged_line_matches(pattern, self.logged())  # noqa: E731
        else:
            probe = proc.is_running
        proc.wait_until(probe, timeout, f"{self.instance}: {r.describe()}")
        if self.on_ready is not None:
            self.on_ready(self.instance)

    def logged(self) -> str:
        """What this instance has logged so far."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def endpoint(self) -> Endpoint:
        """Where the process listens, when its readiness names a port."""
        return Endpoint("127.0.0.1", self.ready.tcp or 0, {"instance": self.instance})
