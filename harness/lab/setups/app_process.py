"""Application instances as OS processes of their own, driven one request at a time.

A setup whose application makes its store calls itself (dual write, outbox) runs each
instance (a workload client) as `python -m <module>`: the client thread sends one JSON
request per line on stdin and reads one JSON answer per line on stdout, and records
the history. So the nemesis's `app-crash` is a SIGKILL of that process (`kill_app`):
the pending writes and the connections die with it, as they do when an application
crashes. An instance exits when its stdin closes, also when the harness dies.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from driftlab.harness.lab.setups.stores import Outcome

AFTER_SOURCE_WRITE = "after-source-write"
"""Step point between the source write and what the application does next."""
READY_LINE = b'{"ready": true}\n'
"""What an application instance writes once it is connected, before its first answer."""
APP_CONFIG_ENV = "DRIFTLAB_APP"
"""The environment variable holding an application instance's configuration (JSON)."""


class AppDied(Outcome):
    """The application process died during a call: the call's outcome is unknown."""

    def __init__(self, process: str) -> None:
        super().__init__("info", f"the application process {process} died")


class AppProcess:
    """The harness's end of one application instance: a `python -m module` process that
    answers one JSON request per line (`serve`)."""

    def __init__(self, process: str, config: dict[str, Any], log_path: Path, module: str) -> None:
        self.process = process
        self._ready = False
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log_file:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", module],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                env={**os.environ, APP_CONFIG_ENV: json.dumps(config)},
            )

    @property
    def pid(self) -> int:
        """The instance's process id."""
        return self.popen.pid

    def alive(self) -> bool:
        """Whether the instance still runs."""
        return self.popen.poll() is None

    def wait_ready(self) -> None:
        """Block until the instance is connected and listening; AppDied if it died
        first."""
        if self._ready:
            return
        assert self.popen.stdout is not None
        try:
            line = self.popen.stdout.readline()
        except OSError:
            line = b""
        if line != READY_LINE:
            raise AppDied(self.process)
        self._ready = True

    def call(self, **request: Any) -> dict[str, Any]:
        """One request and its answer; raises the call's Outcome when it failed, and
        AppDied when the process died before answering."""
        self.wait_ready()
        assert self.popen.stdin is not None and self.popen.stdout is not None
        try:
            self.popen.stdin.write(json.dumps(request).encode() + b"\n")
            self.popen.stdin.flush()
            line = self.popen.stdout.readline()
        except OSError:
            line = b""
        if not line:
            raise AppDied(self.process)
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise Outcome(reply["phase"], reply["error"])
        return reply

    def kill(self) -> None:
        """SIGKILL the instance and reap it: a crash, nothing runs after it."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait()

    def close(self) -> None:
        """End the instance: it exits when its stdin closes (SIGKILL if it does not)."""
        with contextlib.suppress(OSError):
            assert self.popen.stdin is not None
            self.popen.stdin.close()
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        if self.popen.stdout is not None:
            self.popen.stdout.close()


class AppInstances:
    """The application instances a setup runs as OS processes, by process name: what
    `Setup.kill_app` SIGKILLs."""

    def __init__(self, module: str) -> None:
        self.module = module
        self._apps: dict[str, AppProcess] = {}
        self._lock = threading.Lock()

    def spawn(self, process: str, config: dict[str, Any], log_path: Path) -> AppProcess:
        """Start the instance `process`."""
        app = AppProcess(process, config, log_path, self.module)
        with self._lock:
            self._apps[process] = app
        return app

    def kill(self, process: str) -> int | None:
        """SIGKILL the instance `process` and return its pid (None: no such instance)."""
        with self._lock:
            app = self._apps.pop(process, None)
        if app is None:
            return None
        app.kill()
        return app.pid

    def close(self, process: str) -> None:
        """End the instance `process` normally (its client is done)."""
        with self._lock:
            app = self._apps.pop(process, None)
        if app is not None:
            app.close()

    def close_all(self) -> None:
        """End every instance still running (teardown)."""
        with self._lock:
            processes = list(self._apps)
        for process in processes:
            self.close(process)


def serve(handle: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """Answer requests from stdin, one JSON line each, with `handle` until stdin closes:
    the loop of an application instance (`AppProcess`). A failed store call is an
    answer too: the Outcome `handle` raises is answered as its `phase` and `error`."""
    # Ctrl-C reaches the whole process group; the harness ends the instance itself
    # (stdin closed) once it has stopped its workload, healed and closed the history.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = sys.stdout.buffer
    # Connected and listening: the harness starts its workload clock after this line.
    out.write(READY_LINE)
    out.flush()
    for line in sys.stdin.buffer:
        try:
            answer = handle(json.loads(line))
        except Outcome as o:
            answer = {"phase": o.phase, "error": str(o)}
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()
    return 0
