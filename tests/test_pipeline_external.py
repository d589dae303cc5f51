"""A pipeline file pointed at services already running: a second stack, started on its
own, stands in for the user's compose. driftlab puts a Toxiproxy link in front of each
external service, so the schedule's link faults cut them too; crashes are refused,
they are not driftlab's to restart."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from driftlab.harness.app.pipeline import run_pipeline
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.setups.connect import pg_conninfo
from driftlab.scenarios.pipeline.observer import OBSERVER
from driftlab.scenarios.pipeline.spec import PipelineError, load

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis"


@pytest.fixture(scope="module")
def users_stack() -> Iterator[Stack]:
    """PostgreSQL and Redis of "the user's own", not driftlab's session stack."""
    root = Path(tempfile.mkdtemp(prefix="driftlab-users-", dir="/tmp"))
    root.chmod(0o755)
    other = Stack(root, owned=True, temporary=True)
    try:
        other.up("postgres", "redis")
        yield other
    finally:
        other.down()


def external_file(tmp_path: Path, users: Stack, faults: str) -> Path:
    pg, redis = users.endpoint("postgres"), users.endpoint("redis")
    pg_url = (
        f"postgresql://{pg.extra['user']}:{pg.extra['password']}@{pg.host}:{pg.port}/"
        f"{pg.extra['dbname']}"
    )
    redis_url = f"redis://default:{redis.extra['password']}@{redis.host}:{redis.port}/0"
    text = (EXAMPLE / "pipeline.toml").read_text()
    head, _, _ = text.partition("[[faults]]")
    head = head.replace(
        'services = ["postgres", "redis"]',
        f'services = []\nexternal = {{ postgres = "{pg_url}", redis = "{redis_url}" }}',
    ).replace('command = ["bash", "mirror.sh"]', f'command = ["bash", "{EXAMPLE}/mirror.sh"]')
    path = tmp_path / "external.toml"
    path.write_text(head + faults)
    return path


def test_link_faults_reach_external_services(
    stack: Stack, users_stack: Stack, spark: object, tmp_path: Path
) -> None:
    faults = """
[[faults]]
kind = "cut"
target = "mirror->redis"
at = 2.0
duration = 1.5

[[faults]]
kind = "cut"
target = "mirror->postgres"
at = 4.5
duration = 1.5

[expect]
absent = ["missing", "stale", "phantom", "extra"]
"""
    pipeline = load(external_file(tmp_path, users_stack, faults))
    assert pipeline.services == () and set(pipeline.external) == {"postgres", "redis"}
    out = run_pipeline(pipeline, seed=5, runs_dir=tmp_path / "runs", stack=stack)
    r = out.run
    assert r.error is None, r.error
    assert r.exit_code == exitcodes.OK and not r.fault_errors
    assert r.fault_windows == 2
    # The cut reached the user's Redis: while it lasted, the cache took no new value
    # (half a second allowed for a batch already on its way).
    events = [json.loads(line) for f in r.run_dir.history.glob("*.jsonl") for line in f.open()]
    cut = {
        e["phase"]: e["time"]
        for e in events
        if e["type"] == "fault" and e.get("target") == "mirror->redis"
    }
    seen = [
        e["time"]
        for e in events
        if e["type"] == "op" and e.get("process") == OBSERVER and e["phase"] == "ok"
    ]
    assert any(t > cut["stop"] for t in seen) and any(t < cut["start"] for t in seen)
    assert not [t for t in seen if cut["start"] + 500_000_000 < t < cut["stop"]]
    # The links driftlab made in front of the user's services, on its own Toxiproxy.
    upstreams = {link.name: link.upstream for link in stack.links.list()}
    assert upstreams["mirror->redis"] == users_stack.endpoint("redis").address
    assert upstreams["app->postgres"] == users_stack.endpoint("postgres").address
    # The data went to the user's PostgreSQL, not driftlab's.
    with psycopg.connect(pg_conninfo(users_stack.endpoint("postgres"))) as conn:
        schemas = {row[0] for row in conn.execute("SELECT nspname FROM pg_namespace")}
        slots = conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone()
    assert any(s.startswith("dl_pg_to_redis_") for s in schemas)
    assert slots == (0,)  # the run's slot was dropped at teardown


def test_an_external_service_cannot_be_crashed(users_stack: Stack, tmp_path: Path) -> None:
    faults = '\n[[faults]]\nkind = "crash"\ntarget = "redis"\nat = 1\nduration = 1\n'
    with pytest.raises(PipelineError, match=r"^faults\[0\]\.target: 'redis' is not in"):
        load(external_file(tmp_path, users_stack, faults))
