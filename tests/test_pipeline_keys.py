"""No key of the stack for anyone who watches: every example of docs/pipelines.md run while
another local user samples `ps`, which shows every process's command line. No password
of the stack ever shows there (the processes get theirs in their environment, which only
their own user reads), and the role the processes and the workload log in to PostgreSQL
as is the run's own: no superuser, so it can neither run `COPY ... TO PROGRAM` nor
create roles."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from pipeline_support import assert_passed

from driftlab.harness.app.pipeline import run_pipeline
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.pipeline.spec import load

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

PASSWORD_IN_URL = re.compile(r"://[^/\s:@]+:[^/\s@]+@")
"""A URL whose user part carries a password."""


def ps_lines() -> list[str]:
    """Every process's command line, as another local user sees them (root runs `ps`
    as nobody)."""
    argv = ["ps", "-eww", "-o", "ppid=,args="]
    if os.geteuid() == 0:
        argv = ["runuser", "-u", "nobody", "--", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


@contextmanager
def watching() -> Iterator[list[str]]:
    """The command lines `ps` showed while the block ran, sampled every 0.1 s."""
    seen: list[str] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.extend(ps_lines())
            stop.wait(0.1)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()


def stack_secrets(stack: Stack) -> set[str]:
    """Every password the stack drew for its services (its secrets also hold small
    numbers: Kafka's link slots)."""
    found = {s for svc in stack.services.values() for s in svc.spec.secrets.values()}
    return {s for s in found if len(s) >= 16}


def namespace_of(run_dir: object) -> str:
    text = run_dir.log("runner.log").read_text()  # type: ignore[attr-defined]
    found = re.search(r"namespace (dl_\w+)", text)
    assert found, "the runner's log names the run's namespace"
    return found.group(1)


def assert_no_key_shown(stack: Stack, seen: list[str], namespace: str) -> list[str]:
    """No secret of the stack in any sampled command line, and no password in a URL of
    the run's; the backends of the stack's PostgreSQL that served the run's role."""
    assert seen, "ps was sampled"
    for secret in stack_secrets(stack):
        shown = [line.replace(secret, "<secret>") for line in seen if secret in line]
        assert not shown, shown[:1]
    ours = [line for line in seen if namespace in line]
    assert not [line for line in ours if PASSWORD_IN_URL.search(line)]
    postmaster = str(stack["postgres"].process.pid)
    backends = {
        line.split(None, 1)[1]
        for line in seen
        if line.split(None, 1)[0] == postmaster and line.split(None, 1)[1:]
    }
    return sorted(backends)


@pytest.mark.parametrize(
    ("example", "services", "wrote_as_role"),
    [
        ("pg_to_redis", ("postgres", "redis"), "psql postgresql://{ns}@127.0.0.1:"),
        ("http_dual_write", ("postgres", "redis"), None),
        ("pg_to_pg_jdbc", ("postgres", "kafka", "connect"), None),
    ],
)
def test_no_password_of_the_stack_on_any_command_line(
    stack: Stack,
    spark: object,
    tmp_path: Path,
    example: str,
    services: tuple[str, ...],
    wrote_as_role: str | None,
) -> None:
    stack.up(*services)
    with watching() as seen:
        out = run_pipeline(
            load(EXAMPLES / example / "pipeline.toml"), seed=5, runs_dir=tmp_path, stack=stack
        )
    assert_passed(out)
    ns = namespace_of(out.run.run_dir)
    backends = assert_no_key_shown(stack, seen, ns)
    if wrote_as_role is not None:
        assert any(wrote_as_role.format(ns=ns) in line for line in seen)
    # The workload's writes (and the consumer's, Debezium's) ran as the run's role: a
    # backend's title is "postgres: <user> <database> <client> <statement>".
    writers = {b.split()[1] for b in backends if b.split()[-1] in ("INSERT", "UPDATE")}
    assert writers == {ns}, backends


ESCALATE = """
name = "escalate"
services = ["postgres"]

[source]
table = "items"

[processes.probe]
command = ["bash", "-c", '''
q() {{ psql "$DSN" -X -q -At -c "$1" 2>&1; }}
echo "role: $(q "$WHO")"
echo "copy: $(q "COPY (SELECT 1) TO PROGRAM 'touch $MARK'")"
echo "create role: $(q 'CREATE ROLE intruder LOGIN')"
echo "slot: $(q "$SLOT")"
echo ready
exec sleep 600''']
ready = { log = "^ready$" }

[processes.probe.env]
DSN = "{postgres.dsn}"
MARK = "/tmp/{namespace}-copied"
WHO = "SELECT rolsuper, rolcreaterole, rolreplication FROM pg_roles WHERE rolname = current_user"
SLOT = "SELECT 'made' FROM pg_create_logical_replication_slot('{namespace}', 'test_decoding')"

[stores.copy]
sql = { query = "SELECT key, value, version FROM {source.table}" }

[expect]
absent = ["missing", "stale"]

[workload]
clients = 1
keys = 2
rate = 20
duration = 2

[converge]
timeout = 5
window = 1
"""


def test_the_role_of_the_processes_cannot_run_programs_nor_create_roles(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    stack.up("postgres")
    path = tmp_path / "escalate.toml"
    path.write_text(ESCALATE)
    out = run_pipeline(load(path), seed=1, runs_dir=tmp_path / "runs", stack=stack)
    assert_passed(out)
    run_dir = out.run.run_dir
    said = dict(
        line.split(": ", 1)
        for line in run_dir.log("probe.log").read_text().splitlines()
        if ": " in line and not line.startswith("---")
    )
    assert said["role"] == "f|f|t"  # no superuser, no CREATEROLE; logical replication
    assert "permission denied" in said["copy"] or "must be superuser" in said["copy"]
    assert "permission denied" in said["create role"]
    assert said["slot"] == "made"
    # The role went with its run; the slot it made too.
    ns = namespace_of(run_dir)
    assert not Path(f"/tmp/{ns}-copied").exists()
    with psycopg.connect(stack["postgres"].conninfo(), autocommit=True) as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM pg_roles WHERE rolname = %s),"
            " (SELECT count(*) FROM pg_roles WHERE rolname = 'intruder'),"
            " (SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s)",
            (ns, ns),
        ).fetchone()
    assert left == (0, 0, 0)
