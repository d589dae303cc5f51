"""The stack's `analysis` service: a warm Spark that `driftlab analyze` uses when the
stack of `driftlab up` runs it (harness/services/analysis.py)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client
from pathlib import Path

import pytest
from cli_support import DRIFTLAB
from rich.console import Console

from checkers.analyze import analyze
from harness.rundir import RunDir
from harness.services.analysis import ANALYSIS, analyze_remotely
from harness.services.base import Endpoint
from harness.services.stack import DEFAULT_STACK_DIR, Stack, local_stack
from harness.testing.synthetic import generate_history

PLANT = {"duplicate-delivery": 2, "missing": 1, "poll-skip": 1}


pytestmark = [pytest.mark.services, pytest.mark.spark]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Stack]]:
    """A folder whose `.driftlab/stack` runs the analysis service, as `driftlab up`
    would leave it (owned by this test, so it stops with it)."""
    home = tmp_path_factory.mktemp("served")
    with local_stack(home / DEFAULT_STACK_DIR, ANALYSIS) as stack:
        yield home, stack


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
    for field in ("counts", "notes", "lag", "verdict", "history"):
        assert remote.analysis[field] == local[field], field
    assert sum(local["counts"].values()) > 0
    assert (there / "series.json").read_text() == (here / "series.json").read_text()


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
    assert done.analysis["counts"]["duplicate-delivery"] == 2


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


def test_driftlab_analyze_uses_the_warm_server_of_the_stack_here(
    served: tuple[Path, Stack], tmp_path: Path
) -> None:
    home, _ = served
    run = home / "run"
    generate_history(run, events=3_000, seed=7, plant=PLANT)
    done = subprocess.run(
        [DRIFTLAB, "analyze", "run"], cwd=home, capture_output=True, text=True, timeout=600
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said  # no expectations: anomalies found are no verdict
    assert "on the warm Spark of `driftlab up`" in said
    assert (run / "analysis.json").exists()
    # Another master asked for: analysed in process, not by the server.
    cold = subprocess.run(
        [DRIFTLAB, "analyze", "run", "--spark-master", "local[1]"],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "warm Spark" not in cold.stdout + cold.stderr


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
