"""Every run starts from a clean stack: a run SIGKILLed in its fault window leaves a
toxic, a connector and a replication slot on a shared stack (`driftlab up --dir`);
`driftlab status` shows them, and the next run removes them and gets the right verdict.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from cli_support import DRIFTLAB
from lab_support import driftlab, stack_folder, up

from driftlab.harness.history.exitcodes import LabFailure
from driftlab.harness.lab.runner.clean_stack import (
    clean,
    find_leftovers,
    live_namespaces,
    run_lease,
)
from driftlab.harness.lab.services.process import read_start_time
from driftlab.harness.lab.services.stack import Stack

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def shared_stack() -> Iterator[Path]:
    """A stack of `driftlab up --dir` (not owned by the tests), stopped at the end."""
    with stack_folder() as root:
        up(root, "postgres,redis,kafka,connect")
        yield root


def _kill_in_fault_window(scenario: str, stack_dir: Path, runs: Path) -> Path:
    """Start `driftlab run scenario` on the stack and SIGKILL it (the harness process
    alone, as a crash would) once its first fault window is open; returns its folder."""
    argv = [DRIFTLAB, "run", scenario, "--stack-dir", str(stack_dir), "--seed", "1"]
    argv += ["--duration", "30s", "--runs-dir", str(runs), "--no-analyze"]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"the run ended before its fault window ({proc.returncode})"
            for segment in runs.glob("*/*/history/*.jsonl"):
                if '"type":"fault","phase":"start"' in segment.read_text(errors="replace"):
                    # The window is recorded just before the fault is injected; its
                    # windows last seconds at this duration.
                    time.sleep(1.5)
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(30)
                    return segment.parents[1]
            time.sleep(0.2)
        pytest.fail("the run did not reach its fault window in 300 s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_a_run_killed_in_its_partition_does_not_poison_the_next(
    shared_stack: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    _kill_in_fault_window("C15", shared_stack, runs)  # cuts consumer->redis
    status = driftlab("status", "--dir", str(shared_stack))
    assert status.returncode == 0, status.stderr
    shown = status.stdout
    assert "active: link consumer->redis: toxics timeout_downstream, timeout_upstream" in shown
    assert "leftover: connector dl_cdc_store_partition_" in shown, shown
    assert "leftover: replication slot dbz_dl_cdc_store_partition_" in shown

    after = driftlab(
        "run", "C3", "--stack-dir", str(shared_stack), "--seed", "5", "--duration", "6s",
        "--runs-dir", str(runs),
    )  # fmt: skip
    out = " ".join(after.stdout.split())
    assert after.returncode == 0, out + after.stderr
    assert "verdict: reproduced" in out
    log = next(runs.glob("cdc-consumer-crash/*/logs/runner.log")).read_text()
    assert "removed link consumer->redis: toxics" in log, log[-2000:]
    assert "removed connector dl_cdc_store_partition_" in log
    status = driftlab("status", "--dir", str(shared_stack))
    assert "no active toxics, no leftovers of earlier runs" in status.stdout


def test_a_killed_cdc_run_leaves_nothing_the_next_cdc_run_trips_on(
    shared_stack: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    _kill_in_fault_window("C3", shared_stack, runs)  # crashes the consumer
    status = driftlab("status", "--dir", str(shared_stack))
    assert "leftover: connector dl_cdc_consumer_crash_" in status.stdout
    # The same scenario again: the killed run's connector still runs in Connect, and it
    # once made this one's Debezium task fail to register its metrics (one server name).
    after = driftlab(
        "run", "C3", "--stack-dir", str(shared_stack), "--seed", "5", "--duration", "6s",
        "--runs-dir", str(runs),
    )  # fmt: skip
    assert after.returncode == 0, after.stdout + after.stderr
    assert "verdict: reproduced" in " ".join(after.stdout.split())
    stack = Stack.attach(shared_stack)
    with psycopg.connect(stack["postgres"].conninfo(), autocommit=True) as conn:
        slots = conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
    assert slots == []


def test_clean_removes_only_dead_runs_leftovers_and_heals(stack: Stack) -> None:
    stack.up("postgres")
    stack.link("app", "postgres")
    stack.links.cut("app->postgres")
    pg = stack["postgres"]
    live, dead = "dl_test_live_0001", "dl_test_dead_0002"
    with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
        for ns in (live, dead):
            conn.execute(
                "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (f"dbz_{ns}",)
            )
            conn.execute(f"CREATE ROLE {ns} LOGIN REPLICATION")  # a pipeline run's role
        # A pipeline's own slot, named after its namespace alone (docs/pipelines.md).
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (dead,))
    try:
        with run_lease(stack, live):
            found = find_leftovers(stack)
            assert found.toxics == {"app->postgres": ["timeout_downstream", "timeout_upstream"]}
            # The live run's slot and role are no leftovers.
            assert found.slots == [f"dbz_{dead}", dead] and found.roles == [dead]
            # A second run would heal the live one's faults: refused.
            with pytest.raises(LabFailure, match=f"in use by run\\(s\\) {live}"):
                clean(stack)
            assert find_leftovers(stack) == found
        # Its lease gone with the block, the live run's slot is a leftover now.
        removed = clean(stack)
        assert removed.slots == [f"dbz_{dead}", f"dbz_{live}", dead]
        assert removed.roles == [dead, live]
        assert "app->postgres" in removed.toxics
        after = find_leftovers(stack)
        assert not after.toxics and not after.slots and not after.roles
    finally:
        with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name LIKE '%dl_test_%'"
            )
            for ns in (live, dead):
                conn.execute(f"DROP ROLE IF EXISTS {ns}")


def test_a_lease_of_a_dead_process_is_no_live_run(stack: Stack) -> None:
    leases = Path(stack.root) / "leases"
    leases.mkdir(exist_ok=True)
    child = subprocess.Popen(["true"])
    child.wait()
    gone = leases / "dl_gone_0003.json"
    gone.write_text(json.dumps({"pid": child.pid, "start_time": read_start_time(os.getpid())}))
    try:
        assert "dl_gone_0003" not in live_namespaces(stack)
        with run_lease(stack, "dl_here_0004"):
            assert "dl_here_0004" in live_namespaces(stack)
        assert "dl_here_0004" not in live_namespaces(stack)
    finally:
        gone.unlink()


def test_a_killed_pipeline_run_leaves_its_slot_and_role_to_the_sweep(
    shared_stack: Path, tmp_path: Path
) -> None:
    # Example 1's consumer names its slot {namespace}; the run's role is named so too.
    example = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis" / "pipeline.toml"
    runs = tmp_path / "runs"
    _kill_in_fault_window(str(example), shared_stack, runs)
    status = driftlab("status", "--dir", str(shared_stack))
    assert "leftover: replication slot dl_pg_to_redis_" in status.stdout, status.stdout
    assert "leftover: role dl_pg_to_redis_" in status.stdout, status.stdout
    after = driftlab(
        "run", str(example), "--stack-dir", str(shared_stack), "--seed", "2",
        "--runs-dir", str(runs), "--no-analyze",
    )  # fmt: skip
    assert after.returncode == 0, after.stdout + after.stderr
    log = sorted(runs.glob("pg-to-redis/*/logs/runner.log"))[-1].read_text()
    assert "removed replication slot dl_pg_to_redis_" in log, log[-2000:]
    assert "removed role dl_pg_to_redis_" in log
    status = driftlab("status", "--dir", str(shared_stack))
    assert "no active toxics, no leftovers of earlier runs" in status.stdout
