"""Where the services' programs live, and how to install the ones that are missing."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from driftlab.harness.lab.services.base import ServiceError

REPO_ROOT = Path(__file__).resolve().parents[3]
POSTGRES_BIN = Path(os.environ.get("DRIFTLAB_PG_BIN", "/usr/lib/postgresql/15/bin"))
VENDOR_BIN = REPO_ROOT / "vendor" / "bin"


@dataclass(frozen=True, slots=True)
class Binary:
    """A program a service needs, where to look for it, and the command that installs it."""

    program: str
    install: str
    folders: tuple[Path, ...] = ()  # searched first; then PATH (when `on_path`)
    on_path: bool = True


BINARIES: dict[str, Binary] = {
    "initdb": Binary("initdb", "apt-get install postgresql-15", (POSTGRES_BIN,), False),
    "postgres": Binary("postgres", "apt-get install postgresql-15", (POSTGRES_BIN,), False),
    "redis-server": Binary("redis-server", "apt-get install redis-server"),
    # The Debian wrapper in /usr/sbin switches to the rabbitmq account; the real script
    # in /usr/lib/rabbitmq/bin runs as whoever calls it, with our environment.
    "rabbitmq-server": Binary(
        "rabbitmq-server", "apt-get install rabbitmq-server", (Path("/usr/lib/rabbitmq/bin"),)
    ),
    "epmd": Binary("epmd", "apt-get install erlang-base"),
    "nats-server": Binary("nats-server", "apt-get install nats-server"),
    # Toxiproxy's server with its API on a unix socket (tools/driftlab-toxiproxy).
    "driftlab-toxiproxy": Binary(
        "driftlab-toxiproxy", "bash scripts/bootstrap", (VENDOR_BIN,), on_path=False
    ),
}


def find_binary(key: str) -> Path:
    """The absolute path of a program, or a ServiceError naming the install command."""
    spec = BINARIES[key]
    for folder in spec.folders:
        candidate = folder / spec.program
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    if spec.on_path:
        found = shutil.which(spec.program)
        if found:
            return Path(found)
    places = [str(f) for f in spec.folders] + (["PATH"] if spec.on_path else [])
    raise ServiceError(
        f"{spec.program} not found (looked in {', '.join(places)}); "
        f"install it with `{spec.install}` (or run `bash scripts/bootstrap`, which installs "
        f"everything driftlab needs)"
    )
