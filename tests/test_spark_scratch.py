"""Spark's scratch files live in a folder per process, swept once the process is gone
(driftlab.checkers.session.scratch_dir)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from driftlab.checkers.session import scratch_dir, socket_dir


def _dead_pid() -> int:
    """The pid of a process that has exited."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_the_folders_of_dead_processes_are_swept(tmp_path: Path) -> None:
    base = tmp_path / f"driftlab-spark-{os.getuid()}"
    dead, alive = base / str(_dead_pid()), base / str(os.getppid())
    for folder in (dead, alive):
        (folder / "blockmgr-1").mkdir(parents=True)
    (base / "notes").mkdir()  # not a process's folder: left alone

    mine = scratch_dir(tmp_path)

    assert mine == base / str(os.getpid()) and mine.is_dir()
    assert not dead.exists()
    assert (alive / "blockmgr-1").is_dir()
    assert (base / "notes").is_dir()


@pytest.mark.spark
def test_a_killed_sessions_shuffle_blocks_are_removed_by_the_next(tmp_path: Path) -> None:
    # A session in a process group of its own, killed with its JVM after a shuffle:
    # Spark's own clean-up at exit never runs.
    code = textwrap.dedent(
        """
        import time
        from driftlab.checkers.session import get_spark
        sc = get_spark().sparkContext
        sc.parallelize(range(1000), 2).map(lambda x: (x % 7, x)).groupByKey().count()
        print("shuffled", flush=True)
        time.sleep(600)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_DIRS"}
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "shuffled"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    left = tmp_path / f"driftlab-spark-{os.getuid()}" / str(proc.pid)
    assert list(left.glob("blockmgr-*/*/shuffle_*")), "no shuffle blocks in the scratch folder"

    scratch_dir(tmp_path)

    assert not left.exists()


@pytest.mark.spark
def test_the_python_workers_sockets_are_in_the_scratch_folder(spark) -> None:
    # Spark leaves a socket file of its Python workers behind: in the process's scratch
    # folder, swept with it, not in the system's temporary folder.
    sc = spark.sparkContext
    folder = sc.getConf().get("spark.python.unix.domain.socket.dir")
    assert folder == str(scratch_dir())
    assert sc.parallelize(range(4), 2).map(lambda x: x + 1).sum() == 10
    assert list(Path(folder).glob(".*.sock"))


def test_a_cluster_or_a_long_scratch_path_keeps_sparks_socket_folder() -> None:
    scratch = Path("/tmp/driftlab-spark-0/4242")
    assert socket_dir("local[*]", scratch) == scratch
    assert socket_dir("spark://127.0.0.1:7077", scratch) is None
    # A socket's path must fit the system's 108 bytes, Spark's file name included.
    assert socket_dir("local[2]", Path("/t" + "x" * 62)) == Path("/t" + "x" * 62)
    assert socket_dir("local[2]", Path("/t" + "x" * 63)) is None
