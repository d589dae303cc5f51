"""The docker backend, tested without a Docker engine (none runs on this machine or in
CI's): it refuses with the problem and the fix, before any run folder exists, and what
it assumes of docker/compose.yml (ports, credentials, the link range) is what the
compose file says. Starting the containers is untested here; the README says so."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.services.base import ServiceError
from harness.services.docker_backend import (
    COMPOSE_FILE,
    DEFAULT_DOCKER_HOST,
    LINK_PORTS,
    DockerStack,
    compose_services,
    docker_host,
)

FIX = "start Docker or use --backend local"


@pytest.fixture
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """DOCKER_HOST at a socket path where nothing listens."""
    url = f"unix://{tmp_path}/docker.sock"
    monkeypatch.setenv("DOCKER_HOST", url)
    return url


def test_the_default_engine_address_is_the_docker_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert docker_host() == DEFAULT_DOCKER_HOST == "unix:///var/run/docker.sock"


def test_without_an_engine_the_stack_refuses_with_the_fix(no_engine: str) -> None:
    with pytest.raises(ServiceError) as err:
        DockerStack.connect()
    assert str(err.value).startswith(f"no Docker engine at {no_engine}: {FIX}")


def test_a_closed_tcp_engine_address_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{port}")
    with pytest.raises(ServiceError, match=rf"no Docker engine at tcp://127\.0\.0\.1:{port}: "):
        DockerStack.connect()


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


def test_kafka_setups_are_refused_with_the_fix() -> None:
    # `up` decides before it talks to any engine: no client is needed to see the refusal.
    stack = DockerStack(client=None)
    with pytest.raises(ServiceError, match=r"cannot run setups on kafka, connect.*--backend local"):
        stack.up("postgres", "kafka", "connect")


def test_endpoints_agree_with_the_compose_file() -> None:
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    for name, svc in compose_services({}).items():
        published = {p.rsplit(":", 2)[-2]: p for p in compose[name]["ports"]}
        assert str(svc.host_port) in published, (name, compose[name]["ports"])
        assert published[str(svc.host_port)] == f"127.0.0.1:{svc.host_port}:{svc.port}"
    text = COMPOSE_FILE.read_text()
    creds = compose_services({})
    assert "${DRIFTLAB_PG_USER:-" + creds["postgres"].extra["user"] + "}" in text
    assert "${DRIFTLAB_PG_PASSWORD:-" + creds["postgres"].extra["password"] + "}" in text
    assert "${DRIFTLAB_REDIS_PASSWORD:-" + creds["redis"].extra["password"] + "}" in text
    assert "${DRIFTLAB_AMQP_PASSWORD:-" + creds["rabbitmq"].extra["password"] + "}" in text
    assert "${DRIFTLAB_NATS_PASSWORD:-" + creds["nats"].extra["password"] + "}" in text
    env = compose_services({"DRIFTLAB_PG_PASSWORD": "s3cret"})
    assert env["postgres"].extra["password"] == "s3cret"


def test_the_link_range_is_published_by_toxiproxy() -> None:
    ports = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["toxiproxy"]["ports"]
    span = f"{LINK_PORTS.start}-{LINK_PORTS.stop - 1}"
    assert f"127.0.0.1:{span}:{span}" in ports
