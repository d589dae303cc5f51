"""The local stack's state file, through which another harness process finds a running
stack (`driftlab run`, `status` and `down` attach to the stack `driftlab up` started).

`stack.json` (version 1, mode 600, rewritten atomically after every launch and link):

    {"version": 1, "root": "/abs/stack", "owned": false, "owner_pid": 1234,
     "services": {"postgres": {
         "spec": {"ports": {"main": 24011}, "secrets": {"password": "..."},
                  "die_with_parent": false},
         "processes": {"main": {"pid": 99, "pgid": 99, "start_time": 5120,
                                "log_path": "/abs/stack/logs/postgres.log"}},
         "endpoint": {"host": "127.0.0.1", "port": 24011,
                      "extra": {"user": "driftlab", "password": "...", "dbname": "driftlab"}}},
         ...},
     "links": {"app->postgres": {"client": "app", "service": "postgres",
                                 "host": "127.0.0.1", "port": 27003}}}

`processes` lists only live processes (start_time tells a recycled pid apart); after
`down` it is empty while `spec` stays, so the next `up` reuses ports and passwords that
the data folders depend on (PostgreSQL's password is set by initdb).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from driftlab.harness.lab.services.base import Endpoint, ServiceError
from driftlab.harness.lab.services.process import read_start_time
from driftlab.harness.lab.services.supervised import ProcessService

STATE_VERSION = 1
STATE_FILE = "stack.json"


def service_state(service: ProcessService) -> dict[str, Any]:
    """One service's entry: its spec, its live processes and its endpoint."""
    return {
        "spec": service.spec.to_json(),
        "processes": {
            role: record.to_json()
            for role, record in service.records().items()
            if read_start_time(record.pid) == record.start_time
        },
        "endpoint": _endpoint_json(service.endpoint()),
    }


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write `state` (versioned here) to `path` atomically, mode 600: it holds the
    passwords."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"version": STATE_VERSION, **state}, out, indent=2)
    tmp.replace(path)


def read_state(path: Path) -> dict[str, Any]:
    """The state at `path`; ServiceError, saying what to do, if it is unreadable or of
    another version."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ServiceError(
            f"cannot read the stack state {path}: {exc}; stop any leftover services "
            f"(see `ps -ef`) and delete the file"
        ) from exc
    if state.get("version") != STATE_VERSION:
        raise ServiceError(
            f"{path} has state version {state.get('version')}, this driftlab reads "
            f"{STATE_VERSION}; stop it with the driftlab that started it"
        )
    return state


def _endpoint_json(endpoint: Endpoint) -> dict[str, Any]:
    return {"host": endpoint.host, "port": endpoint.port, "extra": dict(endpoint.extra)}
