"""analyze on a real Spark standalone cluster (master + worker from the pip-installed
pyspark) gives the same results as local[*]."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest

from checkers.analyze import analyze
from harness.testing.synthetic import generate_history

IDENTITY = ["checker", "kind", "store", "key", "consumer", "time"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    with open(log, "wb") as out:
        # Own process group: the daemons and anything they fork stop together.
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


def _registered(worker_log: Path) -> bool:
    """The worker says it joined the master (the master's UI port may be taken by
    another process between choosing it and binding it; the log is unambiguous)."""
    return worker_log.exists() and "Successfully registered with master" in (
        worker_log.read_text(errors="replace")
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A master and one worker (1 core, 1 GiB) on loopback; stopped afterwards."""
    base = tmp_path_factory.mktemp("spark-cluster")
    env = os.environ | {
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(base),
        "PYSPARK_PYTHON": sys.executable,
    }
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = [
        _start(
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            base / "master.log",
            env,
        ),
    ]
    try:
        procs.append(
            _start(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(worker_ui),
                    "--work-dir",
                    str(base / "work"),
                ],
                base / "worker.log",
                env,
            )
        )
        deadline = time.monotonic() + 180
        while not _registered(base / "worker.log"):
            for p in procs:
                assert p.poll() is None, (base / "master.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the worker did not register in 180s"
            time.sleep(1)
        yield url, env
    finally:
        for p in reversed(procs):
            _stop(p)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(2400)  # two daemons, two drivers: slow when others share the cores
def test_standalone_cluster_matches_local(
    spark: object, cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, env = cluster
    local_run, cluster_run = tmp_path / "local", tmp_path / "cluster"
    plant = {"duplicate-delivery": 2, "missing": 1, "stale": 1, "poll-skip": 1}
    generate_history(local_run, events=8_000, seed=21, plant=plant)
    shutil.copytree(local_run, cluster_run)

    local = analyze(local_run).analysis
    # One SparkSession per process: the cluster run needs a process of its own.
    driftlab = Path(sys.executable).parent / "driftlab"
    done = subprocess.run(
        [str(driftlab), "analyze", str(cluster_run), "--spark-master", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,  # a loaded 2-core machine; a few minutes otherwise
    )
    assert done.returncode == 0, done.stdout + done.stderr
    remote = json.loads((cluster_run / "analysis.json").read_text())

    assert remote["spark"]["master"] == url
    assert local["spark"]["master"].startswith("local")
    for field in ("counts", "notes", "lag", "verdict", "history"):
        assert remote[field] == local[field], field
    assert {n: c["status"] for n, c in remote["checkers"].items()} == {
        n: c["status"] for n, c in local["checkers"].items()
    }
    rows = [
        pq.read_table(r / "anomalies.parquet").select(IDENTITY).to_pylist()
        for r in (local_run, cluster_run)
    ]
    assert rows[0] == rows[1]
    assert sum(local["counts"].values()) > 0

    series = [json.loads((r / "series.json").read_text()) for r in (local_run, cluster_run)]
    # Percentiles are approximate and may depend on partitioning; everything else exact.
    for name in ("ops", "faults", "offsets", "anomalies", "marks", "bucket_s", "t0_ns"):
        assert series[0][name] == series[1][name], name
    for name in ("latency", "lag"):
        assert [(r["t"], r["count"]) for r in series[0][name]] == [
            (r["t"], r["count"]) for r in series[1][name]
        ], name
    examples = [json.loads((r / "examples.json").read_text()) for r in (local_run, cluster_run)]
    assert {
        k: (e["count"], [(x["key"], x["time_ns"]) for x in e["examples"]])
        for k, e in examples[0]["kinds"].items()
    } == {
        k: (e["count"], [(x["key"], x["time_ns"]) for x in e["examples"]])
        for k, e in examples[1]["kinds"].items()
    }
