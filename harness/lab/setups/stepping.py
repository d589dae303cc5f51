"""Stepped mode of a setup's consumer process: one command at a time, from a file.

`driftlab replay` forces a schedule's interleaving on consumers that are OS processes
(the CDC consumer, the work-queue workers). The parent writes one command at a time,
atomically, to the process's control file (`{"seq": n, "cmd": "poll", ...}`); the
process carries it out and publishes `done: n` in its status file. A command the
process does not know is done without effect, and `run` leaves stepped mode.

A new instance (a restart after a crash) starts with `done` at the file's current
`seq`: commands written before it started were for the instance that died.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

from driftlab.harness.history.waiting import wait_until

RUN = "run"
"""The command that ends stepped mode: the process runs freely from there."""


class SteppedProcess(Protocol):
    """What the parent needs of a consumer process to step it."""

    name: str

    def status(self) -> dict[str, Any]: ...
    def is_running(self) -> bool: ...


class StepFailed(RuntimeError):
    """A stepped process died or did not finish its command in time."""


def read_command(control: Path) -> dict[str, Any]:
    """In the process: the control file's command ({"seq": 0} before the first)."""
    try:
        return dict(json.loads(control.read_text()))
    except (OSError, ValueError):
        return {"seq": 0}


class Control:
    """The parent's side of one process's control file."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.seq = 0

    def send(self, process: SteppedProcess, cmd: str, **fields: Any) -> dict[str, Any]:
        """Hand `process` one command; return its status once it reports it done."""
        if not process.is_running():
            raise StepFailed(f"{process.name} is not running")
        self.seq += 1
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"seq": self.seq, "cmd": cmd, **fields}))
        os.replace(tmp, self.path)

        def done() -> dict[str, Any] | None:
            status = process.status()
            if status.get("done", 0) >= self.seq:
                return status
            if not process.is_running():
                raise StepFailed(f"{process.name} died (see logs/{process.name}.log)")
            return None

        if (status := wait_until(done, self.timeout, 0.02)) is None:
            raise StepFailed(f"{process.name} did not finish {cmd!r} within {self.timeout:.0f} s")
        return status
