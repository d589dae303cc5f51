"""Versions of the components a run used, for config.json and the report's header.

Each probe is cheap (a `--version` call or a vendored jar's name) and may fail: an
unknown version is reported as such, never an error of the run.
"""

from __future__ import annotations

import platform
import re
import subprocess
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path

from driftlab.harness import __version__
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.binaries import REPO_ROOT, find_binary

UNKNOWN = "unknown"
_KAFKA_LIBS = REPO_ROOT / "vendor" / "kafka" / "libs"
_PLUGINS = REPO_ROOT / "vendor" / "kafka" / "plugins"


def _run(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout or out.stderr).strip()


def _binary_version(key: str, pattern: str) -> str:
    try:
        path = find_binary(key)
    except ServiceError:
        return UNKNOWN
    m = re.search(pattern, _run([str(path), "--version"]))
    return m.group(1) if m else UNKNOWN


def _jar_version(folder: Path, prefix: str) -> str:
    for jar in sorted(folder.rglob(f"{prefix}*.jar")) if folder.is_dir() else []:
        return jar.name.removeprefix(prefix).removesuffix(".jar")
    return UNKNOWN


def _debian(package: str) -> str:
    return _run(["dpkg-query", "-W", "-f=${Version}", package]) or UNKNOWN


_PROBES = {
    "postgres": lambda: _binary_version("postgres", r"PostgreSQL\)? ([\d.]+)"),
    "redis": lambda: _binary_version("redis-server", r"v=([\d.]+)"),
    "nats": lambda: _binary_version("nats-server", r"v([\d.]+)"),
    "rabbitmq": lambda: _debian("rabbitmq-server"),
    "toxiproxy": lambda: _binary_version("driftlab-toxiproxy", r"toxiproxy version v?(\S+)"),
    "kafka": lambda: _jar_version(_KAFKA_LIBS, "kafka-clients-"),
    "connect": lambda: "debezium " + _jar_version(_PLUGINS, "debezium-connector-postgres-"),
}


@cache
def _probe(service: str) -> str:
    probe = _PROBES.get(service)
    return probe() if probe else UNKNOWN


def component_versions(services: Iterable[str]) -> dict[str, str]:
    """Versions of driftlab, Python, PySpark and each of `services` (names of the
    stack: postgres, redis, rabbitmq, nats, kafka, connect, toxiproxy)."""
    versions = {
        "driftlab": __version__,
        "python": platform.python_version(),
        # Its installed metadata: importing PySpark costs a run that analyses elsewhere
        # (on the stack's warm Spark) half a second for nothing.
        "pyspark": metadata.version("pyspark"),
    }
    for service in sorted(set(services) | {"toxiproxy"}):
        versions[service] = _probe(service)
    return versions
