"""docker/compose.yml, the images' build file, checked without `docker compose` (not
installed here): `docker/validate` loads it with compose-go, the library behind
`docker compose config` (schema, interpolation, anchors). The tests then hold the
normalized project to what scripts/docker-images builds and the harness runs
(tests/test_docker_backend.py starts the containers).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from driftlab.harness.lab.services.containers import IMAGES, image_name

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker" / "compose.yml"
EXPECTED = set(IMAGES)


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


def test_every_image_is_built(project: dict) -> None:
    assert set(project["services"]) == EXPECTED
    script = (ROOT / "scripts" / "docker-images").read_text()
    listed = re.search(r"^SERVICES=\((.*)\)$", script, re.M)
    assert listed, "scripts/docker-images lists no SERVICES"
    assert set(listed.group(1).split()) == EXPECTED


def test_each_service_builds_its_dockerfile_into_the_harness_tag(project: dict) -> None:
    for name, service in project["services"].items():
        assert service["image"] == image_name(name)
        assert service["build"]["context"] == str(ROOT)
        dockerfile = ROOT / service["build"]["dockerfile"]
        assert dockerfile == ROOT / "docker" / f"{name}.Dockerfile"
        assert dockerfile.read_text().count("FROM debian:bookworm") >= 1, dockerfile


def test_nothing_is_published_beyond_the_host_loopback(project: dict) -> None:
    # Host networking: the servers bind 127.0.0.1 themselves; no port is published.
    for name, service in project["services"].items():
        assert service["network_mode"] == "host", name
        assert not service.get("ports"), f"{name} publishes {service['ports']}"


def test_versions_match_the_local_backend() -> None:
    dockerfiles = {n: (ROOT / "docker" / f"{n}.Dockerfile").read_text() for n in EXPECTED}
    assert "postgresql-15" in dockerfiles["postgres"]
    # The same Toxiproxy program as scripts/bootstrap builds, from the same sources.
    assert "COPY tools/driftlab-toxiproxy/ " in dockerfiles["toxiproxy"]
    assert '(cd "$src" && go build' in (ROOT / "scripts" / "bootstrap").read_text()
    # The same jars as the local backend: what scripts/bootstrap put in vendor/kafka.
    assert "COPY vendor/kafka/libs " in dockerfiles["kafka"]
    assert "COPY vendor/kafka/plugins " in dockerfiles["connect"]


def test_an_unknown_key_is_refused(validator: Path, tmp_path: Path) -> None:
    broken = COMPOSE.read_text().replace("    network_mode: host\n", "    network_mod: host\n", 1)
    path = tmp_path / "compose.yml"
    path.write_text(broken)
    result = load(validator, path)
    assert result.returncode != 0
    assert "network_mod" in result.stderr
