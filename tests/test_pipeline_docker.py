"""A pipeline file on the docker backend: its services (PostgreSQL, Redis, Toxiproxy) in
driftlab's containers, its processes on this machine as commands, reaching the
containers through the same Toxiproxy links; the crash and cut faults act alike.
Example 1's correct mirror passes; its planted bug, run as a user runs it
(`driftlab run FILE --backend docker`), is caught and the command to repeat it keeps
the backend. The same consumer shipped as an image (`image = ...`) runs as a container,
crashed, paused and restarted by the schedule, and its mirror converges.

scripts/bootstrap --docker (make test) starts the engine and builds the images; a
machine without them fails here with the fix, never skips."""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import driftlab
from docker_support import docker_engine, docker_stack_in, short_folder
from pipeline_support import assert_passed

from driftlab.harness.app.pipeline import run_pipeline
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.containers import (
    stack_containers,
    stack_id,
)
from driftlab.harness.lab.services.docker_backend import DockerStack
from driftlab.scenarios.pipeline.spec import load

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
    assert_passed(out, fault_windows=3)
    # The services ran in the stack's containers; the consumer, a command, did not.
    names = {c.name.rsplit("-", 1)[-1] for c in stack_containers(engine, docker_stack.stack_id)}
    assert {"postgres", "redis", "toxiproxy"} <= names and "mirror" not in names
    assert out.run.run_dir.log("mirror.log").read_text().count("mirror ready") == 3
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
    found = re.search(r"stack: its own, in (\S+)", (run_dir / "logs" / "runner.log").read_text())
    assert found, "runner.log names the stack's folder"
    assert stack_containers(engine, stack_id(Path(found.group(1)))) == []


MIRROR_IMAGE = "driftlab-test/mirror:dev"

# Example 1's consumer as a user would ship it: an image holding mirror.sh, psql (from
# driftlab's postgres image) and redis-cli with its libraries (copied from driftlab's
# redis image: no package registry is reached by the build).
MIRROR_DOCKERFILE = """\
FROM driftlab/redis:dev AS redis
FROM driftlab/postgres:dev
COPY --from=redis /usr/bin/redis-cli /usr/bin/redis-cli
COPY --from=redis /usr/lib/x86_64-linux-gnu/liblzf.so.1 \\
     /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \\
     /usr/lib/x86_64-linux-gnu/libatomic.so.1 /usr/lib/x86_64-linux-gnu/
COPY mirror.sh /opt/mirror/mirror.sh
ENTRYPOINT ["bash", "/opt/mirror/mirror.sh"]
"""


@pytest.fixture(scope="module")
def mirror_image(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The image of example 1's consumer, built from driftlab's own images."""
    context = tmp_path_factory.mktemp("mirror-image")
    (context / "Dockerfile").write_text(MIRROR_DOCKERFILE)
    shutil.copy(EXAMPLE / "mirror.sh", context / "mirror.sh")
    engine.images.build(path=str(context), tag=MIRROR_IMAGE, rm=True)
    return MIRROR_IMAGE


def test_a_consumer_image_runs_as_a_container_crashed_paused_and_restarted(
    engine: Any, docker_stack: DockerStack, mirror_image: str, spark: object, tmp_path: Path
) -> None:
    text = (EXAMPLE / "pipeline.toml").read_text()
    text = text.replace('command = ["bash", "mirror.sh"]', f'image = "{mirror_image}"')
    # The cut window becomes a pause of the consumer: docker pause, then unpause.
    text = text.replace('kind = "cut"', 'kind = "pause"').replace(
        'target = "mirror->redis"', 'target = "mirror"'
    )
    assert text.count(mirror_image) == 1 and text.count('kind = "pause"') == 1
    path = tmp_path / "pipeline.toml"
    path.write_text(text)
    out = run_pipeline(load(path), seed=3, runs_dir=tmp_path / "runs", stack=docker_stack)
    assert_passed(out, fault_windows=3)
    # Three containers (the first start, a new one after each crash), their output in
    # the run folder's log, as a command's would be.
    log = out.run.run_dir.log("mirror.log").read_text()
    assert log.count("--- driftlab: starting in a container") == 3, log[-2000:]
    assert log.count("mirror ready") == 3, log[-2000:]
    # Teardown removed the consumer's container; the stack's own keep running.
    names = {c.name for c in stack_containers(engine, docker_stack.stack_id)}
    assert not [n for n in names if n.endswith("-mirror")], names
    assert {f"driftlab-{docker_stack.stack_id}-{s}" for s in ("postgres", "redis")} <= names


def test_an_image_the_engine_lacks_is_bad_input_never_pulled(
    docker_stack: DockerStack, tmp_path: Path
) -> None:
    text = (EXAMPLE / "pipeline.toml").read_text()
    path = tmp_path / "pipeline.toml"
    path.write_text(text.replace('command = ["bash", "mirror.sh"]', 'image = "dl-absent/x:0"'))
    out = run_pipeline(load(path), seed=1, runs_dir=tmp_path / "runs", stack=docker_stack)
    assert out.run.exit_code == exitcodes.BAD_INPUT, out.run.error
    assert "dl-absent/x:0 is not on this machine's Docker engine" in (out.run.error or "")
    assert "docker build -t dl-absent/x:0" in (out.run.error or "")


def test_a_leftover_consumer_container_goes_with_its_stack(
    engine: Any, mirror_image: str, tmp_path: Path
) -> None:
    """An image process's container carries its stack's label: the stack's down
    removes it even when its run never stopped it (a harness killed mid-run)."""
    from driftlab.harness.lab.services.command import Readiness
    from driftlab.harness.lab.services.image_process import ImageProcess, ImageRuntime

    root = Path(tempfile.mkdtemp(prefix="dl-", dir="/tmp"))
    stack = DockerStack(root / "stack", owned=True, client=engine)
    try:
        runtime = ImageRuntime(engine, stack.stack_id, stack.root, mirror_image, "t1")
        # mirror.sh without its environment stops at once, naming what is missing.
        proc = ImageProcess(
            "mirror",
            [],
            tmp_path / "mirror.log",
            env={},
            ready=Readiness(log="mirror ready"),
            runtime=runtime,
        )
        proc.start()
        with pytest.raises(ServiceError, match="exited"):
            proc.wait_healthy(30)
        for follower in threading.enumerate():
            if follower.name == "log-mirror":
                follower.join(10)  # the container's output, copied to the end
        assert "PGDSN" in proc.logged()
        assert len(stack_containers(engine, stack.stack_id)) == 1
        stack.down()
        assert stack_containers(engine, stack.stack_id) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)
