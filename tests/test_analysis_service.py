"""The stack's `analysis` service: a warm Spark that `driftlab analyze` and `driftlab
run` use when the stack of `driftlab up` runs it (harness/lab/services/analysis.py), with
the verdict of an analysis in process, and given up when it does not answer."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_support import DRIFTLAB
from pipeline_support import pipeline_text
from rich.console import Console

from driftlab.checkers.analyze import OUTPUTS, analyze
from driftlab.harness.app.judge import WarmSpark, judge_run
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.runner.runner import RunResult
from driftlab.harness.lab.services import analysis
from driftlab.harness.lab.services.analysis import (
    ANALYSIS,
    ServerUnavailable,
    analysis_on_server,
    analyze_remotely,
    ping,
)
from driftlab.harness.lab.services.backends import attach_stack
from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.ports import LOOPBACK, free_port
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.services.stack_home import ENV as STACK_DIR_ENV
from driftlab.harness.lab.testing.synthetic import generate_history

PLANT = {"duplicate-delivery": 2, "missing": 1, "poll-skip": 1}


pytestmark = [pytest.mark.services, pytest.mark.spark]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Path, Stack]]:
    """A folder whose `stack` is the user's default stack (the commands below are given
    it as $DRIFTLAB_STACK_DIR) and runs the analysis service, left there by
    `driftlab up` as a user's is (a stack owned by this test would be reaped with the
    first `driftlab run` that attaches to it), stopped with `driftlab down`. In /tmp,
    world-traversable: a test adds PostgreSQL, whose unprivileged account must enter
    every parent."""
    home = Path(tempfile.mkdtemp(prefix="driftlab-served-", dir="/tmp"))
    home.chmod(0o755)
    try:
        _up(home, ANALYSIS)
        yield home, attach_stack(home / "stack")
    finally:
        subprocess.run(
            [DRIFTLAB, "down"], cwd=home, env=_env(home), capture_output=True, timeout=300
        )
        shutil.rmtree(home, ignore_errors=True)


def _env(home: Path) -> dict[str, str]:
    """The environment of a user whose default stack is `home`/stack."""
    return {**os.environ, STACK_DIR_ENV: str(home / "stack")}


def _driftlab(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`driftlab *args` of the user whose stack is in `home`, from `cwd` (default
    `home`), its output captured as text."""
    return subprocess.run(
        [DRIFTLAB, *args],
        cwd=cwd or home,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _up(home: Path, services: str) -> None:
    up = _driftlab(home, "up", "--only", services)
    assert up.returncode == 0, up.stdout + up.stderr


def _ping(endpoint: Endpoint) -> str:
    with Client((endpoint.host, endpoint.port), authkey=endpoint.extra["secret"].encode()) as c:
        c.send({"ping": True})
        return c.recv()


def test_the_server_gives_what_an_analysis_in_process_gives(
    spark: object, served: tuple[Path, Stack], tmp_path: Path
) -> None:
    _, stack = served
    here, there = tmp_path / "here", tmp_path / "there"
    generate_history(here, events=6_000, seed=5, plant=PLANT)
    shutil.copytree(here, there)
    local = analyze(here).analysis
    remote = analyze_remotely(stack.endpoint(ANALYSIS), there, Console(quiet=True), 5)
    assert remote.run_dir == RunDir(there)
    for field in ("counts", "coverage", "expectations", "notes", "lag", "verdict", "history"):
        assert getattr(remote.analysis, field) == getattr(local, field), field
    assert sum(local.counts.values()) > 0
    assert sum(local.coverage.values()) > 0
    assert _anomalies(there) == _anomalies(here)
    for name in ("series.json", "examples.json"):
        assert (there / name).read_text() == (here / name).read_text(), name


def _anomalies(run: Path) -> list[tuple[object, ...]]:
    """The rows of RUN/anomalies.parquet, sorted."""
    table = pq.read_table(run / "anomalies.parquet")
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def _analysis(run: Path) -> dict[str, Any]:
    return json.loads((run / "analysis.json").read_text())


def test_driftlab_run_judges_on_the_warm_server_as_this_process_would(
    spark: object, served: tuple[Path, Stack], tmp_path: Path
) -> None:
    home, _ = served
    _up(home, "postgres,redis")
    # A consumer that never writes: the store misses every key (and never converges).
    # From another folder than `driftlab up`'s: the user's one stack all the same.
    project = tmp_path / "project"
    project.mkdir()
    (project / "idle.toml").write_text(pipeline_text("idle"))
    done = _driftlab(home, "run", "idle.toml", "--runs-dir", "runs", cwd=project)
    said = done.stdout + done.stderr
    assert done.returncode == 1 and "not converged" in said, said
    assert "analysed in this process" not in said
    assert f"stack: {home / 'stack'} (left running by `driftlab up`)" in said
    (run,) = (project / "runs" / "idle").glob("*-0")
    summary = json.loads((run / "logs" / "run.json").read_text())
    assert summary["analysed_on"] == "server"
    assert summary["stack"] == {"dir": str(home / "stack"), "own": False}
    served_analysis = _analysis(run)
    assert served_analysis["counts"]["missing"] > 0
    # The same recorded run judged again, in this process.
    here = tmp_path / "here"
    shutil.copytree(run, here)
    for name in OUTPUTS:
        (here / name).unlink(missing_ok=True)
    result = RunResult(RunDir(here), "idle", 0)
    judge_run(RunDir(here), result)
    assert result.analysed_on == "process" and result.analysis_note is None
    local = _analysis(here)
    for field in ("counts", "coverage", "verdict", "reasons"):
        assert served_analysis[field] == local[field], field
    assert _anomalies(run) == _anomalies(here)


def test_a_dead_or_stopped_server_is_given_up_and_the_run_judged_here(
    spark: object, served: tuple[Path, Stack], tmp_path: Path
) -> None:
    _, stack = served
    run = tmp_path / "run"
    generate_history(run, events=3_000, seed=8, plant=PLANT)
    # Nobody listens on its port: given up at once.
    dead = WarmSpark(Endpoint(LOOPBACK, free_port(), {"secret": "no server"}))
    first = RunResult(RunDir(run), "synthetic", 8)
    judge_run(RunDir(run), first, server=dead)
    assert first.analysed_on == "process" and first.counts["duplicate-delivery"] == 2
    assert first.analysis_note is not None and "did not answer" in first.analysis_note
    assert dead.gone is not None
    # Stopped (SIGSTOP): it connects, and never answers the handshake.
    server = WarmSpark(stack.endpoint(ANALYSIS))
    stack[ANALYSIS].pause()
    try:
        second = RunResult(RunDir(run), "synthetic", 8)
        judge_run(RunDir(run), second, server=server)
    finally:
        stack[ANALYSIS].resume()
    assert second.analysed_on == "process" and second.counts == first.counts
    assert second.verdict == first.verdict and second.coverage == first.coverage
    assert server.gone is not None and "did not answer" in server.gone
    # Given up, it is not tried again by the runs that share it.
    third = RunResult(RunDir(run), "synthetic", 8)
    judge_run(RunDir(run), third, server=server)
    assert third.analysed_on == "process" and third.analysis_note is None
    assert ping(stack.endpoint(ANALYSIS))


def test_a_client_that_goes_away_leaves_the_server_serving(
    served: tuple[Path, Stack], tmp_path: Path
) -> None:
    _, stack = served
    endpoint = stack.endpoint(ANALYSIS)
    run = tmp_path / "run"
    generate_history(run, events=6_000, seed=6, plant=PLANT)
    with Client((endpoint.host, endpoint.port), authkey=endpoint.extra["secret"].encode()) as c:
        c.send({"run_dir": str(run), "per_kind": 5})
        assert c.recv()[0] == "line"  # gone after its first progress line
    assert _ping(endpoint) == "pong"
    done = analyze_remotely(endpoint, run, Console(quiet=True), 5)
    assert done.counts["duplicate-delivery"] == 2


@pytest.mark.parametrize(
    "request_",
    [["run_dir"], {"run_dir": 7, "per_kind": 5}, {"per_kind": 5}, {"run_dir": "/x"}],
    ids=["a list", "a number for a path", "no run_dir", "no per_kind"],
)
def test_a_malformed_request_is_refused_and_the_server_goes_on(
    served: tuple[Path, Stack], request_: object
) -> None:
    endpoint = served[1].endpoint(ANALYSIS)
    with Client((endpoint.host, endpoint.port), authkey=endpoint.extra["secret"].encode()) as c:
        c.send(request_)
        kind, error = c.recv()
    assert kind == "error" and "malformed request" in str(error)
    assert _ping(endpoint) == "pong"


def test_driftlab_analyze_uses_the_warm_server_of_the_users_stack(
    served: tuple[Path, Stack], tmp_path: Path
) -> None:
    home, _ = served
    run = tmp_path / "run"
    generate_history(run, events=3_000, seed=7, plant=PLANT)
    done = _driftlab(home, "analyze", "run", cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said  # no expectations: anomalies found are no verdict
    assert f"on the warm Spark of the stack in {home / 'stack'}" in said
    assert (run / "analysis.json").exists()
    # Another master asked for: analysed in process, not by the server.
    cold = _driftlab(home, "analyze", "run", "--spark-master", "local[1]", cwd=tmp_path)
    assert "warm Spark" not in cold.stdout + cold.stderr
    # The stack named, for a user whose own default is elsewhere.
    named = subprocess.run(
        [DRIFTLAB, "analyze", "run", "--stack-dir", str(home / "stack")],
        cwd=tmp_path,
        env={**os.environ, STACK_DIR_ENV: str(tmp_path / "no-stack")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert f"on the warm Spark of the stack in {home / 'stack'}" in named.stdout, named.stderr


def test_a_wrong_key_costs_one_connection_not_the_server(served: tuple[Path, Stack]) -> None:
    _, stack = served
    endpoint = stack.endpoint(ANALYSIS)
    with pytest.raises(AuthenticationError):
        Client((endpoint.host, endpoint.port), authkey=b"not the stack's secret")
    assert stack[ANALYSIS].is_running()
    assert _ping(endpoint) == "pong"


def test_idle_connections_stall_no_other_client(served: tuple[Path, Stack]) -> None:
    _, stack = served
    endpoint = stack.endpoint(ANALYSIS)
    key = endpoint.extra["secret"].encode()
    # One that never answers the handshake, one that authenticates and never asks.
    with (
        socket.create_connection((endpoint.host, endpoint.port)) as silent,
        Client((endpoint.host, endpoint.port), authkey=key),
    ):
        answered: list[str] = []
        pinger = threading.Thread(target=lambda: answered.append(_ping(endpoint)), daemon=True)
        pinger.start()
        pinger.join(30)  # well before the idle clients are dropped (no timing asserted)
        assert answered == ["pong"]
        silent.settimeout(60)
        assert silent.recv(1024)  # the server's challenge, then its end of the line
    assert _ping(endpoint) == "pong"


class _StopsTheServer(io.StringIO):
    """A console's file that stops (SIGSTOP) the server at its first progress line."""

    def __init__(self, service: Any) -> None:
        super().__init__()
        self.service = service
        self.stopped = False

    def write(self, text: str) -> int:
        if not self.stopped:
            self.service.pause()
            self.stopped = True
        return super().write(text)


def test_a_server_stopped_in_the_middle_of_an_analysis_is_given_up(
    served: tuple[Path, Stack], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, stack = served
    # The client's patience, shortened: the path is the same at any length.
    monkeypatch.setattr(analysis, "SILENCE_S", 2.0)
    run = tmp_path / "run"
    generate_history(run, events=3_000, seed=9, plant=PLANT)
    stopper = _StopsTheServer(stack[ANALYSIS])
    try:
        with pytest.raises(ServerUnavailable, match="said nothing for 2 s"):
            analysis_on_server(
                stack.endpoint(ANALYSIS), run, 5, console=Console(file=stopper, quiet=False)
            )
    finally:
        stack[ANALYSIS].resume()
    assert stopper.stopped
    # Resumed, it finds its client gone, cancels that analysis and serves the next.
    done = analyze_remotely(stack.endpoint(ANALYSIS), run, Console(quiet=True), 5)
    assert done.counts["duplicate-delivery"] == 2
