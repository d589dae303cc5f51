"""The docker backend on a real Docker engine: claims reproduced on containers, faults on
containers, and no container left behind by a run, a SIGKILLed run or `driftlab down`.

scripts/bootstrap --docker (make test) installs and starts the engine and builds the
images; a machine without them fails here with the fix, never skips. The claims run
through the installed `driftlab` console script, as a user would.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from cli_support import DRIFTLAB, assert_reproduced, driftlab
from docker_support import docker_engine, docker_stack_in, short_folder
from redis.backoff import NoBackoff
from redis.retry import Retry
from service_checks import check_committed_rows_survive_a_kill
from typer.testing import CliRunner

from driftlab.harness.cli import app
from driftlab.harness.lab.services.base import Endpoint, ServiceError
from driftlab.harness.lab.services.containers import (
    DEFAULT_DOCKER_HOST,
    IMAGES,
    LABEL_STACK,
    docker_client,
    docker_host,
    stack_containers,
    stack_id,
)
from driftlab.harness.lab.services.docker_backend import DockerStack
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.services.stack_protocol import ServiceStack

FIX = "start Docker (`bash scripts/docker-images` starts one and builds the images)"
# One claim per family the issue names: dual-write, CDC, work queue.
CLAIMS = ["C1", "C3", "C7"]

pytestmark = [pytest.mark.services]


@pytest.fixture(scope="module")
def engine() -> Any:
    """The Docker engine with driftlab's images: a failure naming the fix otherwise."""
    return docker_engine(IMAGES)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder of a short path (PostgreSQL's socket path is bounded) that its
    unprivileged account can enter."""
    with short_folder() as path:
        yield path


@pytest.fixture
def stack(engine: Any, short_dir: Path) -> Iterator[DockerStack]:
    with docker_stack_in(engine, short_dir) as docker_stack:
        yield docker_stack


def _wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")


# --- without an engine ----------------------------------------------------------------


@pytest.fixture
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """DOCKER_HOST at a socket path where nothing listens."""
    url = f"unix://{tmp_path}/docker.sock"
    monkeypatch.setenv("DOCKER_HOST", url)
    return url


def test_the_default_engine_address_is_the_docker_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert docker_host() == DEFAULT_DOCKER_HOST == "unix:///var/run/docker.sock"


def test_without_an_engine_the_stack_refuses_with_the_fix(no_engine: str, tmp_path: Path) -> None:
    with pytest.raises(ServiceError) as err:
        DockerStack(tmp_path / "stack")
    assert str(err.value).startswith(f"no Docker engine at {no_engine}: {FIX}")


def test_a_closed_tcp_engine_address_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{port}")
    with pytest.raises(ServiceError, match=rf"no Docker engine at tcp://127\.0\.0\.1:{port}: "):
        docker_client()


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "dual-write-race", "--backend", "docker"],
        ["suite", "--only", "C1", "--backend", "docker"],
    ],
)
def test_run_and_suite_exit_3_before_any_run(
    argv: list[str], no_engine: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, [*argv, "--runs-dir", str(runs)])
    # No engine: the lab cannot run here (3), which is no bad input of the command (2).
    assert result.exit_code == 3, result.output
    # The terminal wraps long paths mid-word at its width; compare without white space.
    squeezed = "".join(result.output.split())
    assert f"noDockerengineat{no_engine}" in squeezed
    assert not list(runs.glob("*/*/config.json"))


def test_an_unknown_backend_is_refused() -> None:
    result = CliRunner().invoke(app, ["run", "C1", "--backend", "podman"])
    assert result.exit_code == 2
    assert "use --backend local or --backend docker" in result.output


def test_both_stacks_offer_the_protocols_surface(engine: Any, tmp_path: Path) -> None:
    members = [m for m in vars(ServiceStack) if not m.startswith("_")] + ["__getitem__"]
    assert {"up", "down", "link", "links", "endpoint", "root", "services"} <= set(members)
    # dir(), not hasattr(): `links` asks the stack's Toxiproxy, which is not up.
    for instance in (Stack(tmp_path / "a"), DockerStack(tmp_path / "b", client=engine)):
        missing = [m for m in members if m not in dir(instance)]
        assert not missing, (type(instance).__name__, missing)


# --- on the engine --------------------------------------------------------------------


def test_services_run_in_labelled_containers_on_loopback(stack: DockerStack) -> None:
    stack.up("postgres", "redis")
    names = {c.name: c for c in stack_containers(stack.client, stack.stack_id)}
    assert set(names) == {
        f"driftlab-{stack.stack_id}-{s}" for s in ("toxiproxy", "postgres", "redis")
    }
    for container in names.values():
        assert container.labels[LABEL_STACK] == stack_id(stack.root)
        assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    # Generated credentials, as locally: the password in the endpoint is the one set.
    pg = stack.endpoint("postgres")
    assert pg.host == "127.0.0.1" and len(pg.extra["password"]) == 32
    conninfo = psycopg.conninfo.make_conninfo(host=pg.host, port=pg.port, **pg.extra)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        assert conn.execute("SHOW wal_level").fetchone() == ("logical",)
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
    wrong = {**pg.extra, "password": "wrong"}
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(psycopg.conninfo.make_conninfo(host=pg.host, port=pg.port, **wrong))
    # The state file reads as the local backend's, plus the stack id for the reaper.
    state = json.loads(stack.state_path.read_text())
    assert state["docker"] == {"stack_id": stack.stack_id}
    assert state["services"]["postgres"]["processes"]["main"]["pid"] > 0


def test_kill_pause_restart_act_on_the_container(stack: DockerStack) -> None:
    stack.up("postgres", "redis")
    check_committed_rows_survive_a_kill(stack["postgres"], stack.link("app", "postgres"))

    cache = stack.endpoint("redis")
    client = _redis(cache)
    assert client.ping()
    stack["redis"].pause()
    assert stack["redis"].is_running()  # frozen, not dead
    with pytest.raises(redis.TimeoutError):
        client.ping()
    stack["redis"].resume()
    client = _redis(cache)
    assert client.ping()
    # A link fault cuts the client's path through Toxiproxy's container, not the server.
    via_link = stack.link("app", "redis")
    assert _redis(via_link).ping()
    stack.links.disable("app->redis")
    with pytest.raises(redis.ConnectionError):
        _redis(via_link).ping()
    assert client.ping()


def _redis(ep: Endpoint) -> redis.Redis:
    """A client that fails at once: redis-py retries a timed-out call three times with
    backoff by default, which would only slow these checks down."""
    return redis.Redis(
        host=ep.host,
        port=ep.port,
        password=ep.extra["password"],
        socket_timeout=1,
        retry=Retry(NoBackoff(), 0),
    )


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_dual_write_cdc_and_work_queue_claims_on_docker(engine: Any, tmp_path: Path) -> None:
    """`driftlab suite --backend docker` reproduces a dual-write, a CDC (Kafka Connect
    with Debezium) and a work-queue claim, and leaves no container behind."""
    before = {c.id for c in stack_containers(engine)}
    proc = driftlab(
        tmp_path, "suite", "--only", ",".join(CLAIMS), "--backend", "docker", timeout=1100
    )
    index_path = tmp_path / "runs" / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    assert proc.returncode == 0, (index, proc.stdout[-3000:], proc.stderr[-3000:])
    assert_reproduced(index, CLAIMS)
    assert {c.id for c in stack_containers(engine)} <= before


@pytest.mark.timeout(300)
def test_a_sigkilled_run_leaves_no_container(engine: Any, tmp_path: Path) -> None:
    before = {c.id for c in stack_containers(engine)}
    run = subprocess.Popen(
        [
            str(DRIFTLAB),
            "run",
            "dual-write-race",
            "--backend",
            "docker",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def new_postgres() -> list[Any]:
            return [
                c
                for c in stack_containers(engine)
                if c.id not in before and c.name.endswith("-postgres") and c.status == "running"
            ]

        started = _wait(new_postgres, 120, "the run's postgres container")
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    sid = started[0].labels[LABEL_STACK]
    _wait(lambda: not stack_containers(engine, sid), 60, f"no container of stack {sid}")
    root = Path(started[0].labels["driftlab.root"])
    _wait(lambda: not root.exists(), 60, f"{root} removed")


@pytest.mark.timeout(300)
def test_down_leaves_no_container_network_or_volume(engine: Any, short_dir: Path) -> None:
    tmp_path = short_dir
    root = short_dir / "stack"
    networks = {n.id for n in engine.networks.list()}
    volumes = {v.id for v in engine.volumes.list()}
    up = driftlab(
        tmp_path,
        "up",
        "--backend",
        "docker",
        "--only",
        "redis,postgres",
        "--dir",
        str(root),
        timeout=240,
    )
    assert up.returncode == 0, up.stdout + up.stderr
    sid = stack_id(root)
    assert len(stack_containers(engine, sid)) == 3  # toxiproxy, redis, postgres
    # `up` returned: the containers outlive the command, as a local `driftlab up`'s servers.
    # Without --backend too: the state file says the stack is docker's.
    status = driftlab(tmp_path, "status", "--dir", str(root), timeout=60)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "healthy" in status.stdout
    down = driftlab(tmp_path, "down", "--backend", "docker", "--dir", str(root), timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not stack_containers(engine, sid)
    assert {n.id for n in engine.networks.list()} == networks
    assert {v.id for v in engine.volumes.list()} == volumes
