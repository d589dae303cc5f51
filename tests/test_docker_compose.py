"""The Docker stack, checked without a Docker engine (none runs on CI's machine).

`docker/validate` loads the compose file with compose-go, the library behind
`docker compose config`: schema, interpolation and references between services. The
tests then hold the normalized project to driftlab's own rules. Nothing here starts a
container: that part is untested on this machine and the README says so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker" / "compose.yml"
EXPECTED = {
    "postgres",
    "kafka",
    "connect",
    "redis",
    "rabbitmq",
    "nats",
    "toxiproxy",
    "spark-master",
    "spark-worker",
}


@pytest.fixture(scope="module")
def validator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    out = tmp_path_factory.mktemp("validate") / "compose-validate"
    subprocess.run([go, "build", "-o", str(out), "."], cwd=ROOT / "docker" / "validate", check=True)
    return out


def load(validator: Path, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(validator), str(path)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def project(validator: Path) -> dict:
    result = load(validator, COMPOSE)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_every_component_is_in_the_stack(project: dict) -> None:
    assert set(project["services"]) == EXPECTED


def test_published_ports_bind_loopback_only(project: dict) -> None:
    for name, service in project["services"].items():
        for port in service.get("ports", []):
            assert port.get("host_ip") == "127.0.0.1", f"{name} publishes {port} beyond loopback"


def test_postgres_has_logical_decoding(project: dict) -> None:
    command = project["services"]["postgres"]["command"]
    assert "wal_level=logical" in command


def test_kafka_runs_kraft_without_zookeeper(project: dict) -> None:
    env = project["services"]["kafka"]["environment"]
    assert "controller" in env["KAFKA_PROCESS_ROLES"]
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert not any("zookeeper" in name for name in project["services"])


def test_versions_match_the_local_backend(project: dict) -> None:
    images = {name: s["image"] for name, s in project["services"].items()}
    pom = (ROOT / "scripts" / "jars" / "pom.xml").read_text()
    kafka = re.search(r"<kafka.version>([\d.]+)</kafka.version>", pom)
    assert kafka, "scripts/jars/pom.xml names no kafka.version"
    assert images["kafka"] == f"apache/kafka:{kafka.group(1)}"
    pyproject = (ROOT / "pyproject.toml").read_text()
    spark = re.search(r'"pyspark==([\d.]+)"', pyproject)
    assert spark
    assert images["spark-master"] == images["spark-worker"] == f"apache/spark:{spark.group(1)}"
    assert images["postgres"].startswith("postgres:15")


def test_a_broken_reference_is_refused(validator: Path, tmp_path: Path) -> None:
    broken = COMPOSE.read_text().replace("      - spark-master\n", "      - spark-mastr\n", 1)
    path = tmp_path / "compose.yml"
    path.write_text(broken)
    result = load(validator, path)
    assert result.returncode != 0
    assert "spark-mastr" in result.stderr
