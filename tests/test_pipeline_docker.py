"""A pipeline file on the docker backend: its services (PostgreSQL, Redis, Toxiproxy) in
driftlab's containers, its processes on this machine as commands, reaching the
containers through the same Toxiproxy links; the crash and cut faults act alike.
Example 1's correct mirror passes; its planted bug, run as a user runs it
(`driftlab run FILE --backend docker`), is caught and the command to repeat it keeps
the backend.

scripts/bootstrap --docker (make test) starts the engine and builds the images; a
machine without them fails here with the fix, never skips."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import driftlab
from docker_support import docker_engine, docker_stack_in, short_folder

from harness import exitcodes
from harness.app.pipeline import run_pipeline
from harness.pipeline.spec import load
from harness.services.containers import (
    stack_containers,
    stack_id,
)
from harness.services.docker_backend import DockerStack

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis"


@pytest.fixture(scope="module")
def engine() -> Any:
    """The Docker engine with the images a pipeline of PostgreSQL and Redis needs."""
    return docker_engine(["postgres", "redis", "toxiproxy"])


@pytest.fixture(scope="module")
def docker_stack(engine: Any) -> Iterator[DockerStack]:
    """A docker stack in a short folder its services' account can enter."""
    with short_folder() as root, docker_stack_in(engine, root) as stack:
        yield stack


def test_the_mirror_passes_with_its_services_in_containers(
    engine: Any, docker_stack: DockerStack, spark: object, tmp_path: Path
) -> None:
    out = run_pipeline(
        load(EXAMPLE / "pipeline.toml"), seed=2, runs_dir=tmp_path, stack=docker_stack
    )
    r = out.run
    assert r.error is None and out.not_converged == [], r.error
    assert r.exit_code == exitcodes.OK and r.verdict == "reproduced", (r.verdict, r.counts)
    assert r.fault_windows == 3 and not r.fault_errors
    # The services ran in the stack's containers; the consumer, a command, did not.
    names = {c.name.rsplit("-", 1)[-1] for c in stack_containers(engine, docker_stack.stack_id)}
    assert {"postgres", "redis", "toxiproxy"} <= names and "mirror" not in names
    assert r.run_dir.log("mirror.log").read_text().count("mirror ready") == 3
    upstreams = {link.name: link.upstream for link in docker_stack.links.list()}
    assert upstreams["mirror->redis"] == docker_stack.endpoint("redis").address


def test_the_cli_runs_a_file_on_docker_and_catches_the_planted_bug(
    engine: Any, tmp_path: Path
) -> None:
    target = EXAMPLE / "pipeline-bug.toml"
    runs = tmp_path / "runs"
    done = driftlab(
        tmp_path, "run", str(target), "--backend", "docker", "--runs-dir", str(runs),
        "--seed", "2", timeout=600,
    )  # fmt: skip
    assert done.returncode == exitcodes.VERDICT, done.stdout + done.stderr
    assert "verdict: unexpected anomaly" in done.stdout
    assert "missing" in done.stdout or "stale" in done.stdout
    assert f"reproduce with: driftlab run {target} --seed 2 --backend docker" in done.stdout
    # The run's own docker stack was stopped and its containers removed.
    (run_dir,) = (runs / "pg-to-redis-bug").glob("*-2")
    found = re.search(r"stack: \w+, in (\S+)", (run_dir / "logs" / "runner.log").read_text())
    assert found, "runner.log names the stack's folder"
    assert stack_containers(engine, stack_id(Path(found.group(1)))) == []
