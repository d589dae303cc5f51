"""analyze on a real Spark standalone cluster (master + worker from the pip-installed
pyspark, driftlab.harness.lab.testing.spark_cluster) gives the same results as local[*]."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from driftlab.checkers.analyze import analyze
from driftlab.harness.lab.testing.spark_cluster import Cluster, standalone_cluster
from driftlab.harness.lab.testing.synthetic import generate_history

IDENTITY = ["checker", "kind", "store", "key", "consumer", "time"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A master and one worker (1 core, 1 GiB) on loopback; stopped afterwards."""
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as running:
        yield running


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(2400)  # two daemons, two drivers: slow when others share the cores
def test_standalone_cluster_matches_local(spark: object, cluster: Cluster, tmp_path: Path) -> None:
    url, env = cluster.url, cluster.env
    local_run, cluster_run = tmp_path / "local", tmp_path / "cluster"
    plant = {"duplicate-delivery": 2, "missing": 1, "stale": 1, "poll-skip": 1}
    generate_history(local_run, events=8_000, seed=21, plant=plant)
    shutil.copytree(local_run, cluster_run)

    analyze(local_run)
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
    local, remote = (
        json.loads((r / "analysis.json").read_text()) for r in (local_run, cluster_run)
    )

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
    # The percentiles are exact nearest ranks: the whole series match, whatever the
    # partitioning.
    assert series[0] == series[1]
    examples = [json.loads((r / "examples.json").read_text()) for r in (local_run, cluster_run)]
    assert {
        k: (e["count"], [(x["key"], x["time_ns"]) for x in e["examples"]])
        for k, e in examples[0]["kinds"].items()
    } == {
        k: (e["count"], [(x["key"], x["time_ns"]) for x in e["examples"]])
        for k, e in examples[1]["kinds"].items()
    }
