"""A pipeline file run the way a user's suite runs it: PostgreSQL and Redis started by
testcontainers (`PostgresContainer`, `RedisContainer` on driftlab's images, host
networking on free loopback ports, Ryuk off: no registry serves its image), handed to
the pytest plugin's `run_scenario` as the pipeline's external services. Example 1
(a shell consumer mirroring a table into Redis) is crashed and cut off from the test's
Redis through the link driftlab puts in front of it: the correct consumer passes, the
planted bug is caught naming its keys.

scripts/bootstrap --docker (make test) starts the engine and builds the images; a
machine without them fails here with the fix, never skips."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest
import redis

from driftlab.harness.app.outcome import Outcome
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.containers import docker_client, image_name
from driftlab.harness.lab.services.ports import free_port
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.pipeline.containers import (
    ContainerError,
    external_urls,
    host_network,
    postgres_url,
)
from driftlab.scenarios.pipeline.spec import PipelineError, load

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis"
FIX = "run `bash scripts/docker-images` (it starts the engine and builds the images)"


def check_images() -> None:
    """driftlab's postgres and redis images, recent enough to run without a command."""
    try:
        client = docker_client()
    except ServiceError as exc:
        pytest.fail(f"testcontainers needs a Docker engine: {exc}")
    for image in ("postgres", "redis"):
        try:
            cmd = client.images.get(image_name(image)).attrs["Config"].get("Cmd")
        except Exception as exc:
            pytest.fail(f"{image_name(image)}: {exc}; {FIX}")
        if not cmd:
            pytest.fail(f"{image_name(image)} has no command of its own: {FIX}")


@pytest.fixture(scope="module")
def containers() -> Iterator[dict[str, Any]]:
    """The user's PostgreSQL and Redis, started as a testcontainers suite starts them."""
    check_images()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
        from testcontainers.community.postgres import PostgresContainer
        from testcontainers.community.redis import RedisContainer
        from testcontainers.core.wait_strategies import LogMessageWaitStrategy

        pg_port, redis_port = free_port(), free_port()
        pg = host_network(
            PostgresContainer(
                image_name("postgres"),
                port=pg_port,
                username="shop",
                password="pw 'quoted'",
                dbname="shop",
                driver=None,
            ).with_env("PGPORT", str(pg_port))
        )
        # RedisContainer waits by pinging its published port: none on the host
        # network, so it waits for the server's log line instead.
        cache = host_network(
            RedisContainer(image_name("redis"), port=redis_port, password="cache-pw")
            .with_command(
                f"redis-server --bind 127.0.0.1 --port {redis_port} --requirepass cache-pw"
            )
            .waiting_for(LogMessageWaitStrategy("Ready to accept connections"))
        )
        with pg, cache:
            yield {"postgres": pg, "redis": cache}


def test_containers_become_external_urls(containers: dict[str, Any], tmp_path: Path) -> None:
    urls = external_urls(containers)
    pg_port, redis_port = containers["postgres"].port, containers["redis"].port
    assert urls == {
        "postgres": f"postgresql://shop:pw%20%27quoted%27@127.0.0.1:{pg_port}/shop",
        "redis": f"redis://default:cache-pw@127.0.0.1:{redis_port}/0",
    }
    # The URLs reach the containers' servers with their credentials.
    with psycopg.connect(urls["postgres"]) as conn:
        assert conn.execute("SHOW wal_level").fetchone() == ("logical",)
    assert redis.Redis.from_url(urls["redis"]).ping()
    # The file's services become external; a crash of one is refused as for any.
    pipeline = load(EXAMPLE / "pipeline.toml", urls)
    assert pipeline.services == () and set(pipeline.external) == {"postgres", "redis"}
    assert pipeline.external["postgres"].extra["password"] == "pw 'quoted'"
    text = (EXAMPLE / "pipeline.toml").read_text()
    crash = text.replace('target = "mirror"', 'target = "redis"').replace(
        'command = ["bash", "mirror.sh"]', f'command = ["bash", "{EXAMPLE}/mirror.sh"]'
    )
    (tmp_path / "crash.toml").write_text(crash)
    with pytest.raises(PipelineError, match=r"^faults\[0\]\.target: 'redis' is not in"):
        load(tmp_path / "crash.toml", urls)


def test_a_container_not_started_or_unknown_is_refused_with_the_fix() -> None:
    from testcontainers.community.postgres import PostgresContainer
    from testcontainers.core.container import DockerContainer

    with pytest.raises(ContainerError, match=r"Container is not started: start the container"):
        postgres_url(PostgresContainer(image_name("postgres")))
    with pytest.raises(
        ContainerError,
        match=r"^external kafka: driftlab reads no container .*get_bootstrap_server\(\)",
    ):
        external_urls({"kafka": DockerContainer(image_name("kafka"))})
    with pytest.raises(
        ContainerError, match=r"a Fake has no `username`; pass testcontainers' PostgresContainer"
    ):
        postgres_url(type("Fake", (DockerContainer,), {"port": 1})(image_name("postgres")))


def test_the_mirror_passes_against_the_suites_containers(
    run_scenario: Callable[..., Outcome],
    containers: dict[str, Any],
    stack: Stack,
    spark: object,
) -> None:
    outcome = run_scenario(EXAMPLE / "pipeline.toml", seed=3, external=containers)
    r = outcome.result
    assert outcome.passed, outcome.summary()
    assert r.fault_windows == 3 and not r.fault_errors
    # The crashes and the cut ran; the cut was of driftlab's link in front of the
    # test's own Redis container.
    events = [json.loads(line) for f in r.run_dir.history.glob("*.jsonl") for line in f.open()]
    faults = {(e["kind"], e["target"], e["phase"]) for e in events if e["type"] == "fault"}
    assert ("cut", "mirror->redis", "stop") in faults and ("crash", "mirror", "stop") in faults
    upstreams = {link.name: link.upstream for link in stack.links.list()}
    assert upstreams["mirror->redis"] == f"127.0.0.1:{containers['redis'].port}"
    assert upstreams["app->postgres"] == f"127.0.0.1:{containers['postgres'].port}"
    # The data went to the containers, not to driftlab's own services.
    urls = external_urls(containers)
    with psycopg.connect(urls["postgres"]) as conn:
        schemas = [row[0] for row in conn.execute("SELECT nspname FROM pg_namespace")]
    (ns,) = [s for s in schemas if s.startswith("dl_pg_to_redis_")]
    assert redis.Redis.from_url(urls["redis"]).keys(f"{ns}:*")


def test_the_planted_bug_is_caught_on_the_suites_containers(
    run_scenario: Callable[..., Outcome], containers: dict[str, Any], spark: object
) -> None:
    outcome = run_scenario(EXAMPLE / "pipeline-bug.toml", seed=3, external=containers)
    r = outcome.result
    assert not outcome.passed
    assert r.exit_code == exitcodes.VERDICT and r.verdict == "unexpected anomaly", r.counts
    caught = {k: n for k, n in outcome.forbidden.items() if k in ("missing", "stale")}
    assert caught, outcome.summary()
    rows = pq.read_table(r.run_dir.anomalies).to_pylist()
    keys = {row["key"] for row in rows if row["kind"] in caught}
    assert len(keys) == sum(caught.values()) and all(k.startswith("k") for k in keys)
    # The test's containers are gone after it: the test itself is the reproduction.
    test_id = os.environ["PYTEST_CURRENT_TEST"].rsplit(" (", 1)[0]
    assert outcome.rerun == f"pytest '{test_id}'"
    assert f"reproduce with: pytest '{test_id}'" in outcome.summary()


def test_external_services_are_for_pipeline_files(
    run_scenario: Callable[..., Outcome], containers: dict[str, Any]
) -> None:
    with pytest.raises(pytest.UsageError, match=r"external services are for pipeline files"):
        run_scenario("C1", external=containers)
