"""Where a service's programs run: the `Runtime` protocol and `LocalRuntime`, programs
installed on this machine run as supervised local processes (the docker backend's
runtime is driftlab.harness.lab.services.containers)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, Unpack

from driftlab.harness.lab.services import jvm
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.binaries import find_binary
from driftlab.harness.lab.services.process import (
    ProcessOptions,
    ProcessRecord,
    RunOptions,
    StopOptions,
    SupervisedProcess,
    die_with_parent,
)


class Runtime(Protocol):
    """Where a service's programs run: as processes of this machine (`LocalRuntime`) or
    in containers (driftlab.harness.lab.services.containers). Services build the same command lines
    and files for both; only the programs' paths and the launching differ."""

    def binary(self, key: str) -> str:
        """The absolute path of a program named in binaries.BINARIES."""
        ...

    def java(self) -> str:
        """The java executable."""
        ...

    def kafka_libs(self) -> Path:
        """The Kafka broker and Connect classpath folder."""
        ...

    def kafka_plugins(self) -> Path:
        """Connect's plugin.path (the Debezium connector)."""
        ...

    def process(
        self, name: str, argv: Sequence[str], log_path: Path, **options: Unpack[ProcessOptions]
    ) -> SupervisedProcess:
        """A handle on `argv`, not started yet (SupervisedProcess's arguments)."""
        ...

    def adopt(
        self, name: str, record: ProcessRecord, **options: Unpack[StopOptions]
    ) -> SupervisedProcess:
        """A handle on a process another harness process started (from a state file)."""
        ...

    def run(self, argv: Sequence[str], log_path: Path, **options: Unpack[RunOptions]) -> int:
        """Run a one-off command to its end (initdb, Kafka's storage format), output
        appended to `log_path`; its exit status, or ServiceError past `timeout`."""
        ...


class LocalRuntime:
    """Programs installed on this machine (scripts/bootstrap), run as local processes."""

    def binary(self, key: str) -> str:
        return str(find_binary(key))

    def java(self) -> str:
        return jvm.java_binary()

    def kafka_libs(self) -> Path:
        return jvm.libs_dir()

    def kafka_plugins(self) -> Path:
        return jvm.plugins_dir()

    def process(
        self, name: str, argv: Sequence[str], log_path: Path, **options: Unpack[ProcessOptions]
    ) -> SupervisedProcess:
        return SupervisedProcess(name, argv, log_path, **options)

    def adopt(
        self, name: str, record: ProcessRecord, **options: Unpack[StopOptions]
    ) -> SupervisedProcess:
        return SupervisedProcess.adopt(name, record, **options)

    def run(self, argv: Sequence[str], log_path: Path, **options: Unpack[RunOptions]) -> int:
        user = options.get("user")
        timeout = options.get("timeout")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            try:
                done = subprocess.run(
                    list(argv),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    user=user,
                    group=user,
                    extra_groups=[] if user else None,
                    cwd=options.get("cwd"),
                    timeout=timeout,
                    check=False,
                    # A one-off is in no state file, so no reaper stops it: a run killed
                    # during Kafka's storage format left the formatter writing its meta
                    # files into the folder the reaper was removing.
                    preexec_fn=die_with_parent(os.getpid()),
                )
            except subprocess.TimeoutExpired:
                raise ServiceError(
                    f"{Path(argv[0]).name} did not finish in {timeout:.0f}s; see {log_path}"
                ) from None
        return done.returncode
