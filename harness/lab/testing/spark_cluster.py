"""A Spark standalone cluster on loopback from the pip-installed pyspark: a master and
`workers` workers, each its own process group, stopped together. For the cluster test
and the cluster benchmark; a real deployment brings its own cluster."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark

from driftlab.harness.history.waiting import wait_until

REGISTERED = "Successfully registered with master"


@dataclass(frozen=True)
class Cluster:
    """A running cluster: its master URL and the environment a driver needs to use it
    (the workers' Python is the driver's own)."""

    url: str
    env: dict[str, str]
    workers: int
    worker_pids: tuple[int, ...] = ()  # each worker daemon's; its executors are its children


class ClusterError(RuntimeError):
    """The cluster did not come up; the message holds the end of the daemon's log."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    with open(log, "wb") as out:
        # Own process group: the daemon and anything it forks stop together.
        return subprocess.Popen(
            [str(spark_class), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def _registered(log: Path) -> bool:
    # The master's UI port may be taken between choosing it and binding it; the
    # worker's log line is unambiguous.
    return log.exists() and REGISTERED in log.read_text(errors="replace")


@contextlib.contextmanager
def standalone_cluster(
    base: Path, workers: int = 1, cores: int = 1, memory: str = "1g", timeout_s: float = 180
) -> Iterator[Cluster]:
    """Start a master and `workers` workers of `cores` cores and `memory` each, logs
    and work folders under `base`; yield once every worker has registered; stop them
    all on the way out, whatever happens."""
    base.mkdir(parents=True, exist_ok=True)
    env = os.environ | {
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(base),
        "PYSPARK_PYTHON": sys.executable,
    }
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    master = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port())]
    procs = [_start(["org.apache.spark.deploy.master.Master", *master], base / "master.log", env)]
    try:
        logs = []
        for i in range(workers):
            logs.append(base / f"worker-{i}.log")
            args = [url, "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory]
            args += ["--webui-port", str(_free_port()), "--work-dir", str(base / f"work-{i}")]
            procs.append(_start(["org.apache.spark.deploy.worker.Worker", *args], logs[-1], env))

        def registered() -> bool:
            if all(_registered(log) for log in logs):
                return True
            for proc, log in zip(procs, [base / "master.log", *logs], strict=True):
                if proc.poll() is not None:
                    raise ClusterError(
                        f"{log.name} ended: {log.read_text(errors='replace')[-2000:]}"
                    )
            return False

        why = f"the workers did not register in {timeout_s:.0f} s (logs in {base})"
        if not wait_until(registered, timeout_s, 1):
            raise ClusterError(why)
        yield Cluster(url, env, workers, tuple(p.pid for p in procs[1:]))
    finally:
        for proc in reversed(procs):
            _stop(proc)
