"""The catalogue of bad inputs and hurt labs: each runs the real `driftlab` command and
asserts its exit status (driftlab.harness.history.exitcodes: 2 bad input, 3 the lab failed) and the
one
line that names the problem and the fix, with no traceback.

The read-only and full-disk cases mount small tmpfs file systems (root only).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_support import DRIFTLAB

from driftlab.harness.history.reader import convert_to_parquet
from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.schema import RunHeader
from driftlab.harness.lab.testing.synthetic import generate_history

UNREACHABLE = "spark://127.0.0.1:1"  # port 1: nothing listens there


@dataclass
class World:
    """The folders the cases point at, made once."""

    tmp: Path
    run: Path  # a sound synthetic run
    corrupt_config: Path
    scrambled_parquet: Path
    no_ops: Path
    empty: Path
    stopped_stack: Path
    readonly: Path | None
    full: Path | None
    full_runs: Path | None  # a 1 MiB file system for the run folders of a whole run


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def _driftlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DRIFTLAB, *args], capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("catalogue")
    run = tmp / "run"
    generate_history(run, events=2_000, seed=3, jsonl=True)

    corrupt_config = tmp / "corrupt-config"
    shutil.copytree(run, corrupt_config)
    (corrupt_config / "config.json").write_text("{ not json")

    # Intact footer, scrambled pages: the file reads as Parquet until Spark scans it.
    scrambled = tmp / "scrambled"
    shutil.copytree(run, scrambled)
    convert_to_parquet(scrambled)
    parquet = scrambled / "history.parquet"
    data = bytearray(parquet.read_bytes())
    data[8 : len(data) // 2] = os.urandom(len(data) // 2 - 8)
    parquet.write_bytes(bytes(data))

    # A run killed before its workload: a header, no operation, a fault never opened.
    no_ops = tmp / "no-ops"
    params = {"faults": [{"kind": "cut", "target": "consumer->redis", "at": 2.5}]}
    no_ops.mkdir()
    (no_ops / "config.json").write_text(
        json.dumps(
            {
                "scenario": "killed-early",
                "seed": 1,
                "params": params,
                "expectations": {"duplicate-delivery": "present"},
            }
        )
    )
    Recorder(no_ops, RunHeader("killed-early/1", "killed-early", 1, params=params)).close()

    empty = tmp / "empty"
    empty.mkdir()
    no_config = tmp / "no-config"
    shutil.copytree(run, no_config)
    (no_config / "config.json").unlink()
    (tmp / "a-file").write_text("not a folder\n")
    (tmp / "binary-schedule.json").write_bytes(bytes(range(256)) * 4)
    (tmp / "empty.edn").write_bytes(b"")

    # A stack started and stopped: its stack.json remembers its ports.
    stopped = Path(tempfile.mkdtemp(prefix="driftlab-stack-test-", dir="/tmp"))
    up = _driftlab("up", "--dir", str(stopped), "--only", "redis")
    assert up.returncode == 0, up.stdout + up.stderr
    assert _driftlab("down", "--dir", str(stopped)).returncode == 0

    mounts = []
    readonly: Path | None = tmp / "readonly"
    if _mount_tmpfs(readonly, "16m"):
        mounts.append(readonly)
        shutil.copytree(run, readonly / "run")
        subprocess.run(["mount", "-o", "remount,ro", str(readonly)], check=True)
    else:
        readonly = None
    full: Path | None = tmp / "full"
    if _mount_tmpfs(full, "8m"):
        mounts.append(full)
        (full / "run").mkdir()
        shutil.copytree(run / "history", full / "run" / "history")
        shutil.copy(run / "config.json", full / "run")
        free = shutil.disk_usage(full).free
        (full / "filler").write_bytes(b"\0" * (free - 16 * 1024))
    else:
        full = None
    full_runs: Path | None = tmp / "full-runs"
    if _mount_tmpfs(full_runs, "1m"):
        mounts.append(full_runs)
    else:
        full_runs = None
    try:
        yield World(
            tmp, run, corrupt_config, scrambled, no_ops, empty, stopped, readonly, full, full_runs
        )
    finally:
        for m in mounts:
            subprocess.run(["umount", str(m)], check=False)
        shutil.rmtree(stopped, ignore_errors=True)


@dataclass(frozen=True)
class Case:
    """One bad input: the command line, its exit status and a piece of its message."""

    argv: Callable[[World], list[str]]
    code: int
    message: str
    needs: str | None = None  # a World field that may be None (no tmpfs mount)
    refused_up_front: bool = False  # nothing may be left in the folder _refused gives


PIPELINE = """
name = "mistake"
services = ["postgres"]
[source]
table = "items"
[processes.mirror]
command = {command}
[stores.copy]
sql = {{ query = "SELECT key, value, version FROM {{source.table}}" }}
"""


def _pipeline(w: World, name: str, command: str) -> str:
    """A pipeline file whose process runs `command` (TOML), in the world's folder."""
    path = w.tmp / f"{name}.toml"
    path.write_text(PIPELINE.format(command=command))
    (w.tmp / "not-executable.sh").write_text("echo ready\n")  # mode 644
    return str(path)


def _refused(w: World) -> str:
    """The runs folder of a case refused up front: it must not come to exist."""
    return str(w.tmp / "refused")


def _refused_pipeline(name: str, command: str, message: str, *options: str) -> Case:
    """`driftlab run` of a pipeline file whose process runs `command` (TOML), with
    `options`: refused up front (exit 2), saying `message`."""
    return Case(
        lambda w: ["run", _pipeline(w, name, command), *options, "--runs-dir", _refused(w)],
        2,
        message,
        refused_up_front=True,
    )


CATALOGUE: dict[str, Case] = {
    "unknown scenario": Case(lambda w: ["run", "no-such-scenario"], 2, "driftlab suite --list"),
    "bad duration": Case(lambda w: ["run", "C1", "--duration", "soon"], 2, "not a duration"),
    "malformed spark master": Case(
        lambda w: ["run", "C1", "--spark-master", "foo"], 2, "is not a Spark master URL"
    ),
    "unknown backend": Case(
        lambda w: ["run", "C1", "--backend", "podman"], 2, "use --backend local or"
    ),
    "no stack in --stack-dir": Case(
        lambda w: ["run", "C1", "--stack-dir", str(w.empty)], 2, "start one with `driftlab up"
    ),
    "unknown claim in suite": Case(lambda w: ["suite", "--only", "C1,C99"], 2, "C99"),
    "unknown scenario in matrix": Case(
        lambda w: ["matrix", "--scenarios", "C99"], 2, "no scenario 'C99'"
    ),
    "no such run directory": Case(
        lambda w: ["analyze", str(w.tmp / "nope")], 2, "no such run directory"
    ),
    "corrupt config.json": Case(
        lambda w: ["analyze", str(w.corrupt_config)], 2, "not readable JSON"
    ),
    "scrambled history.parquet": Case(
        lambda w: ["analyze", str(w.scrambled_parquet)],
        2,
        "history.parquet cannot be read (corrupt); delete it",
    ),
    "report of an unanalysed run": Case(
        lambda w: ["report", str(w.empty)], 2, "analysis.json is missing; run `driftlab analyze"
    ),
    "unknown service": Case(lambda w: ["up", "--only", "bogus"], 2, "unknown service(s) bogus"),
    # Not up: an answer (as `down` with nothing to stop), not bad input.
    "status of no stack": Case(lambda w: ["status", "--dir", str(w.empty)], 3, "no stack in"),
    "unreachable spark master (run)": Case(
        lambda w: ["run", "C1", "--spark-master", UNREACHABLE, "--runs-dir", str(w.tmp / "r")],
        3,
        f"Spark master {UNREACHABLE} is not reachable",
    ),
    "unreachable spark master (analyze)": Case(
        lambda w: ["analyze", str(w.run), "--spark-master", UNREACHABLE],
        3,
        f"Spark master {UNREACHABLE} is not reachable",
    ),
    "stopped --stack-dir": Case(
        lambda w: ["run", "C1", "--stack-dir", str(w.stopped_stack)], 3, "is not running"
    ),
    "workload never ran": Case(lambda w: ["analyze", str(w.no_ops)], 3, "the workload never ran"),
    "read-only runs folder": Case(
        lambda w: ["run", "C1", "--runs-dir", str(w.readonly / "runs")],  # type: ignore[operator]
        3,
        "is on a read-only file system",
        needs="readonly",
    ),
    "read-only run folder (analyze)": Case(
        lambda w: ["analyze", str(w.readonly / "run")],  # type: ignore[operator]
        3,
        "is on a read-only file system",
        needs="readonly",
    ),
    "seed beyond 64 bits": Case(
        lambda w: ["run", "C1", "--seed", str(2**70), "--runs-dir", _refused(w)],
        2,
        "does not fit in 64 bits",
        refused_up_front=True,
    ),
    "--runs-dir under a regular file": Case(
        lambda w: ["run", "C1", "--runs-dir", str(w.tmp / "a-file" / "runs")],
        2,
        "a-file is a file, not a folder",
    ),
    "binary schedule for replay": Case(
        lambda w: ["replay", str(w.tmp / "binary-schedule.json"), "--runs-dir", _refused(w)],
        2,
        "the file is not UTF-8 text",
        refused_up_front=True,
    ),
    "analyze of a folder without config.json": Case(
        lambda w: ["analyze", str(w.tmp / "no-config")], 2, "has no config.json, so it is no run"
    ),
    "empty Jepsen file": Case(
        lambda w: [
            "analyze",
            "--from",
            "jepsen",
            str(w.tmp / "empty.edn"),
            "--runs-dir",
            _refused(w),
        ],
        2,
        "empty.edn is empty",
        refused_up_front=True,
    ),
    "duration too short for any fault": Case(
        lambda w: ["run", "C3", "--duration", "1ms", "--runs-dir", _refused(w)],
        2,
        "leaves no room for any of scenario cdc-consumer-crash's 2 fault(s)",
        refused_up_front=True,
    ),
    "pipeline command not on PATH": _refused_pipeline(
        "nocmd",
        '["my-consumr"]',
        "processes.mirror.command: my-consumr is not on PATH; install it, or give its path",
    ),
    "pipeline command not executable": _refused_pipeline(
        "noexec", '["./not-executable.sh"]', "./not-executable.sh is not executable; chmod +x"
    ),
    "pipeline duration of 1 ms": _refused_pipeline(
        "short",
        '["bash", "-c", "sleep 60"]',
        "--duration: 0.001 s is too short for a run; give at least 1 s",
        "--duration",
        "1ms",
    ),
    "disk full (analyze)": Case(
        lambda w: ["analyze", str(w.full / "run")],  # type: ignore[operator]
        3,
        "No space left on device",
        needs="full",
    ),
    "disk full (run)": Case(
        lambda w: ["run", "C1", "--duration", "60s", "--runs-dir", str(w.full_runs)],
        3,
        "disk full while writing",
        needs="full_runs",
    ),
}


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_catalogue(name: str, world: World) -> None:
    case = CATALOGUE[name]
    if case.needs and getattr(world, case.needs) is None:
        pytest.skip("needs root to mount a tmpfs")
    done = _driftlab(*case.argv(world))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == case.code, said
    assert case.message in said
    assert "Traceback" not in said
    # The unreachable master is found before any scenario starts: no run folder.
    if "spark master" in name:
        assert not (world.tmp / "r").exists()
    if case.refused_up_front:
        assert not Path(_refused(world)).exists()


def test_a_port_taken_since_is_named_with_its_holder(world: World) -> None:
    state = json.loads((world.stopped_stack / "stack.json").read_text())
    port = state["services"]["redis"]["spec"]["ports"]["main"]
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen()
        done = _driftlab("up", "--dir", str(world.stopped_stack), "--only", "redis")
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 3, said
    assert f"redis: port {port} (main) on 127.0.0.1 is in use by pid {os.getpid()}" in said
    assert "stop that program and run again" in said
    _driftlab("down", "--dir", str(world.stopped_stack))
