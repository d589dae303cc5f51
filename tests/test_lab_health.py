"""The lab never blames the pipeline for its own failure, and its services come back.

On a stack of `driftlab up --dir` (not owned by the tests): a stack service killed in
the middle of a run, by no scheduled fault, makes the run `lab failed` (exit 3) with one
line naming the service and when, and run.json records it; `driftlab up` then brings
the service back (Toxiproxy with its proxies, Kafka past the Toxiproxy listeners it
advertises, RabbitMQ past its own epmd) and `driftlab status` says so. Two runs started
together on one stack: exactly one proceeds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from cli_support import DRIFTLAB
from lab_support import driftlab, output, stack_folder, up

from driftlab.harness.lab.runner.watchdog import Watchdog
from driftlab.harness.lab.services.connect import ConnectService, DebeziumPostgres
from driftlab.harness.lab.services.postgres import PostgresService
from driftlab.harness.lab.services.process import read_start_time
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.services.toxiproxy import API_DIR, API_SOCKET
from driftlab.harness.lab.services.toxiproxy_api import ToxiproxyApi

pytestmark = pytest.mark.services


LAB = "postgres,redis,kafka,connect,rabbitmq"
"""What CDC runs and the broker tests need."""


@pytest.fixture(scope="module")
def lab() -> Iterator[Path]:
    """A stack of `driftlab up --dir` with the services of LAB."""
    with stack_folder() as root:
        up(root, LAB)
        yield root


@pytest.fixture(autouse=True)
def _lab_back_up(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test of the lab, every service of LAB runs again, even when the test
    failed before its own `up`: else the tests after it failed on its dead service."""
    yield
    if "lab" in request.fixturenames:
        root = request.getfixturevalue("lab")
        if not all(_alive(root, service) for service in LAB.split(",")):
            up(root, LAB)


def _alive(root: Path, service: str) -> bool:
    groups = [p["pgid"] for p in _processes(root, service).values()]
    return bool(groups) and all(_group_alive(g) for g in groups)


def _processes(root: Path, service: str) -> dict[str, dict[str, int]]:
    state = json.loads((root / "stack.json").read_text())
    return state["services"][service]["processes"]


def _kill(root: Path, service: str) -> None:
    """SIGKILL every process group of `service` and wait until they are gone."""
    groups = [p["pgid"] for p in _processes(root, service).values()]
    assert groups, f"{service} has no live process to kill"
    for pgid in groups:
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while any(_group_alive(g) for g in groups):
        assert time.monotonic() < deadline, f"{service} survived SIGKILL"
        time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _run_and_kill(
    root: Path, runs: Path, scenario: str, service: str, *, restarted: bool = False
) -> tuple[str, int, Path]:
    """`driftlab run scenario` on the stack; once its workload runs (and, if
    `restarted`, once the scenario's own crash of `service` is over: its processes are
    new ones), SIGKILL `service` outside any fault of the scenario. Returns what the run
    said, its exit status and its folder."""
    before = _pgids(root, service)

    def strike() -> None:
        deadline = time.monotonic() + 120
        while restarted and not (
            _alive(root, service) and before.isdisjoint(_pgids(root, service))
        ):
            assert time.monotonic() < deadline, f"the run's crash of {service} never ended"
            time.sleep(0.2)
        _kill(root, service)

    return _run_and_strike(root, runs, scenario, strike)


def _pgids(root: Path, service: str) -> set[int]:
    return {p["pgid"] for p in _processes(root, service).values()}


def _run_and_strike(
    root: Path, runs: Path, scenario: str, strike: Callable[[], None]
) -> tuple[str, int, Path]:
    """`driftlab run scenario` on the stack, and `strike` once its workload runs."""
    argv = [DRIFTLAB, "run", scenario, "--stack-dir", str(root), "--seed", "3"]
    argv += ["--duration", "20s", "--runs-dir", str(runs), "--no-analyze"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while not any(
            '"type":"op"' in s.read_text(errors="replace") for s in runs.glob("*/*/history/*.jsonl")
        ):
            assert proc.poll() is None, f"the run ended before its workload: {proc.stdout}"
            assert time.monotonic() < deadline, "the workload did not start in 300 s"
            time.sleep(0.2)
        time.sleep(1.0)
        strike()
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    run_dir = next(p.parent.parent for p in runs.glob("*/*/logs/run.json"))
    return " ".join(out.split()), proc.returncode, run_dir


def _lab_failed(
    root: Path, runs: Path, scenario: str, service: str, *, restarted: bool = False
) -> tuple[str, Path]:
    """`_run_and_kill`, which must end the run as the lab failing, in one line naming
    `service` and no traceback; what the run said and its folder."""
    said, code, run_dir = _run_and_kill(root, runs, scenario, service, restarted=restarted)
    assert code == 3, said
    assert f"lab failed: {service} died at" in said, said
    assert "Traceback" not in said
    return said, run_dir


def started_watchdog(
    stack: Stack, service: str, held: set[str], *, answer_every: float, answer_grace: float
) -> tuple[Watchdog, threading.Event]:
    """A started watchdog of `service` that excuses what `held` holds down (a scheduled
    fault), and the event it sets when it stops the run."""
    stopped = threading.Event()
    dog = Watchdog(
        stack, [service], held.__contains__, stopped.set,
        interval=0.1, answer_every=answer_every, answer_grace=answer_grace,
    )  # fmt: skip
    dog.start()
    return dog, stopped


def await_breakdown(dog: Watchdog, seconds: float, unnoticed: str) -> None:
    """Wait until `dog` names a breakdown; the test fails with `unnoticed` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not dog.breakdowns:
        assert time.monotonic() < deadline, unnoticed
        time.sleep(0.1)


def test_toxiproxy_killed_mid_run_is_the_lab_failing_and_up_restores_its_proxies(
    lab: Path, tmp_path: Path
) -> None:
    said, run_dir = _lab_failed(lab, tmp_path / "runs", "C15", "toxiproxy")
    assert "into the workload, which no scheduled fault did" in said
    assert "unexpected anomaly" not in said
    summary = json.loads((run_dir / "logs" / "run.json").read_text())
    assert summary["verdict"] == "lab failed"
    assert summary["lab_failures"][0]["service"] == "toxiproxy"
    assert summary["lab_failures"][0]["at"] >= 0

    status = driftlab("status", "--dir", str(lab))
    assert status.returncode == 3, output(status)
    assert "toxiproxy" in output(status) and "stopped" in output(status)

    up(lab, LAB)
    status = driftlab("status", "--dir", str(lab))
    assert status.returncode == 0, output(status)
    assert "missing: link" not in output(status)
    # Every proxy the stack made is back on its port: a client of a link gets through.
    proxies = json.loads((lab / "data" / "toxiproxy" / "proxies.json").read_text())
    assert {p["name"] for p in proxies} >= {"connect->kafka", "connect->postgres"}
    after = driftlab(
        "run", "C3", "--stack-dir", str(lab), "--seed", "5", "--duration", "6s",
        "--runs-dir", str(tmp_path / "after"), "--no-analyze",
    )  # fmt: skip
    assert after.returncode == 0, output(after)


def test_connect_killed_mid_cdc_run_is_the_lab_failing_and_up_brings_it_back(
    lab: Path, tmp_path: Path
) -> None:
    _, run_dir = _lab_failed(lab, tmp_path / "runs", "C3", "connect")
    summary = json.loads((run_dir / "logs" / "run.json").read_text())
    assert [f["service"] for f in summary["lab_failures"]][:1] == ["connect"]
    assert summary["quiesced"] is False

    up(lab, LAB)
    status = driftlab("status", "--dir", str(lab))
    assert status.returncode == 0, output(status)


def _fail_connector(root: Path) -> None:
    """Give the run's connector a transform that fails on every record (the field it
    reads does not exist): Connect fails its task, with no fault of the scenario
    behind it and the worker answering all along."""
    connect = Stack.attach(root)["connect"]
    assert isinstance(connect, ConnectService)
    (name,) = connect.registered()
    config = connect.rest("GET", f"/connectors/{name}/config")
    config.update({
        "transforms": "broken",
        "transforms.broken.type": "org.apache.kafka.connect.transforms.ValueToKey",
        "transforms.broken.fields": "no_such_field",
    })  # fmt: skip
    connect.rest("PUT", f"/connectors/{name}/config", config)


def test_a_connector_task_failed_with_no_fault_is_the_lab_failing(
    lab: Path, tmp_path: Path
) -> None:
    # The connector's task FAILED while Connect answered: the run read the history of a
    # pipeline that had stopped capturing and judged it, as if the pipeline lost data.
    said, code, run_dir = _run_and_strike(
        lab, tmp_path / "runs", "C3", lambda: _fail_connector(lab)
    )
    assert code == 3, said
    assert re.search(r"lab failed: connect task 0 of connector \S+ FAILED \(\S+", said), said
    assert "unexpected anomaly" not in said and "Traceback" not in said
    summary = json.loads((run_dir / "logs" / "run.json").read_text())
    assert summary["verdict"] == "lab failed"
    assert [f["service"] for f in summary["lab_failures"]][:1] == ["connect"]
    # The run removed its connector: the stack is whole again.
    status = driftlab("status", "--dir", str(lab))
    assert status.returncode == 0, output(status)


def test_a_task_that_fails_after_a_scheduled_connect_restart_is_the_lab_failing(
    lab: Path,
) -> None:
    # Connect killed and restarted by a scheduled fault came back healthy, its task
    # RUNNING; the task failed on the next record, once the window had closed: the worker
    # still answered, and the run judged a pipeline that no longer captured.
    stack = Stack.attach(lab)
    connect, pg = stack["connect"], stack["postgres"]
    assert isinstance(connect, ConnectService) and isinstance(pg, PostgresService)
    with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS lab_restart_items (id int PRIMARY KEY)")
    connector = DebeziumPostgres(
        "lab-restart", stack.link("connect", "postgres"), "labrestart",
        ("public.lab_restart_items",),
        extra={  # fails on its first record: the field it reads does not exist
            "transforms": "broken",
            "transforms.broken.type": "org.apache.kafka.connect.transforms.ValueToKey",
            "transforms.broken.fields": "no_such_field",
        },
    )  # fmt: skip
    connect.put_connector(connector)
    held = {"connect"}  # what the scheduled fault holds down
    dog, stopped = started_watchdog(stack, "connect", held, answer_every=0.5, answer_grace=30.0)
    dog.workload_started()
    try:
        connect.kill()  # the scheduled crash, and its heal
        connect.start()
        connect.wait_healthy()
        held.clear()
        with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
            conn.execute("INSERT INTO lab_restart_items VALUES (1)")
        await_breakdown(dog, 60, "a FAILED task went unnoticed")
    finally:
        dog.stop()
        connect.delete_connector(connector.name)
        _drop_slot(pg, connector)
    [found] = dog.breakdowns
    assert found.service == "connect" and stopped.is_set()
    assert re.fullmatch(r"task 0 of connector lab-restart FAILED \(\S+.*\)", found.what), found


def _drop_slot(pg: PostgresService, connector: DebeziumPostgres) -> None:
    """Drop the connector's slot once its walsender let go, and its publication."""
    with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while conn.execute(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (connector.slot,)
        ).fetchone():
            assert time.monotonic() < deadline, f"slot {connector.slot} stayed active"
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s AND NOT active",
                (connector.slot,),
            )
            time.sleep(0.2)
        conn.execute(f'DROP PUBLICATION IF EXISTS "{connector.publication}"')
        conn.execute("DROP TABLE lab_restart_items")


def test_kafka_killed_after_its_scheduled_crash_is_one_line_not_a_client_error(
    lab: Path, tmp_path: Path
) -> None:
    # C16 crashes Kafka itself in a window: once that window closed, Kafka is the lab's.
    said, _ = _lab_failed(lab, tmp_path / "runs", "C16", "kafka", restarted=True)
    died = re.search(r"kafka died at ([\d.]+) s", said)
    assert died is not None and float(died.group(1)) > 6.0, said  # its window: 5-6 s
    assert "KafkaException" not in said and "rdkafka" not in said
    up(lab, LAB)


def test_kafka_killed_mid_cdc_run_ends_it_at_once_and_up_leaves_a_stack_c3_reproduces_on(
    lab: Path, tmp_path: Path
) -> None:
    # Once the run waited out its clients and a Debezium task of the dead run held its
    # replication slot, so the run ended 65-100 s after Kafka died (the bound
    # is 15 s) and the next C3 failed on the slot.
    killed: list[float] = []

    def strike() -> None:
        _kill(lab, "kafka")
        killed.append(time.monotonic())

    said, code, run_dir = _run_and_strike(lab, tmp_path / "runs", "C3", strike)
    ended_after = time.monotonic() - killed[0]
    assert code == 3 and "lab failed: kafka died at" in said, said
    assert ended_after < 15, f"the run ended {ended_after:.0f} s after Kafka died"
    summary = json.loads((run_dir / "logs" / "run.json").read_text())
    assert summary["ops"] > 0 and summary["workload_s"] > 0, summary
    up(lab, LAB)
    after = driftlab(
        "run", "C3", "--stack-dir", str(lab), "--seed", "5",
        "--runs-dir", str(tmp_path / "after"),
    )  # fmt: skip
    assert after.returncode == 0 and "reproduced" in output(after), output(after)


def test_a_broker_death_is_one_line_naming_rabbitmq(lab: Path, tmp_path: Path) -> None:
    said, _ = _lab_failed(lab, tmp_path / "runs", "C7", "rabbitmq")
    assert "AMQPConnectionError" not in said
    up(lab, LAB)


def test_up_brings_back_a_killed_kafka_past_the_toxiproxy_listeners_it_advertises(
    lab: Path,
) -> None:
    _kill(lab, "kafka")
    said = up(lab, LAB)
    assert "kafka: healthy in" in said, said
    assert "in use by" not in said
    status = driftlab("status", "--dir", str(lab))
    assert status.returncode == 0, output(status)


def test_the_broker_pid_is_the_broker_and_up_brings_it_back_past_its_epmd(lab: Path) -> None:
    processes = _processes(lab, "rabbitmq")
    broker, epmd = processes["main"]["pid"], processes["epmd"]["pid"]
    # What `status` lists is the Erlang VM itself, not a shell that would orphan it.
    assert Path(f"/proc/{broker}/comm").read_text().strip() == "beam.smp"
    os.kill(broker, signal.SIGKILL)  # as a user with the pid from `status` would
    deadline = time.monotonic() + 30
    while read_start_time(broker) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert read_start_time(epmd) is not None  # its epmd, left serving
    status = driftlab("status", "--dir", str(lab))
    assert status.returncode == 3 and "stopped" in output(status)
    said = up(lab, LAB)
    assert "rabbitmq: healthy in" in said, said
    assert _processes(lab, "rabbitmq")["epmd"]["pid"] == epmd  # reused, not in the way
    assert driftlab("status", "--dir", str(lab)).returncode == 0


def test_two_runs_started_together_on_one_stack_one_refuses(lab: Path, tmp_path: Path) -> None:
    argv = [DRIFTLAB, "run", "C1", "--stack-dir", str(lab), "--duration", "8s", "--no-analyze"]
    procs = [
        subprocess.Popen(
            [*argv, "--runs-dir", str(tmp_path / f"runs{i}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outs = [" ".join(p.communicate(timeout=600)[0].split()) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 3], outs
    refused = next(o for p, o in zip(procs, outs, strict=True) if p.returncode == 3)
    assert f"the stack in {lab} is in use by run(s)" in refused, refused
    assert "Traceback" not in refused


def test_the_watchdog_excuses_a_scheduled_fault_and_names_a_silent_service(stack: Stack) -> None:
    stack.up("redis")
    redis = stack["redis"]
    held: set[str] = set()  # what a scheduled fault holds down
    dog, stopped = started_watchdog(stack, "redis", held, answer_every=0.2, answer_grace=2.0)
    try:
        held.add("redis")
        redis.pause()  # a scheduled pause: silent, and no failure of the lab
        time.sleep(4)
        assert dog.breakdowns == [] and not stopped.is_set()
        redis.resume()
        time.sleep(1)
        held.clear()
        dog.workload_started()
        redis.pause()  # frozen by nobody's schedule: the lab failed
        await_breakdown(dog, 20, "a silent redis went unnoticed")
    finally:
        redis.resume()
        dog.stop()
    [found] = dog.breakdowns
    assert found.service == "redis" and found.what.startswith("stopped answering")
    assert 0 <= found.at < 5
    assert stopped.is_set()


def test_two_ups_on_one_folder_take_turns() -> None:
    with stack_folder() as root:
        argv = [DRIFTLAB, "up", "--dir", str(root), "--only", "redis"]
        procs = [
            subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(2)
        ]
        outs = [" ".join(p.communicate(timeout=300)[0].split()) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        # The second found the first's stack: one redis, started once.
        assert sum("redis: starting" in o for o in outs) == 1, outs
        status = driftlab("status", "--dir", str(root))
        assert status.returncode == 0, output(status)


def test_status_names_a_link_toxiproxy_lost_and_up_gives_it_back(lab: Path) -> None:
    api = ToxiproxyApi(lab / "data" / "toxiproxy" / API_DIR / API_SOCKET)
    api.delete("connect->kafka")
    status = driftlab("status", "--dir", str(lab))
    assert status.returncode == 3, output(status)
    assert "missing: link connect->kafka: toxiproxy lost it" in output(status)
    up(lab, LAB)
    assert api.proxy("connect->kafka") is not None
    assert driftlab("status", "--dir", str(lab)).returncode == 0


def test_under_umask_000_nothing_of_a_stack_or_run_is_writable_by_others(tmp_path: Path) -> None:
    runs = tmp_path / "runs"

    def umasked(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DRIFTLAB, *args], capture_output=True, text=True, timeout=600, check=False,
            preexec_fn=lambda: os.umask(0),
        )  # fmt: skip

    with stack_folder() as root:
        assert umasked("up", "--dir", str(root), "--only", "redis").returncode == 0
        run = umasked(
            "run", "C1", "--stack-dir", str(root), "--duration", "3s", "--no-analyze",
            "--runs-dir", str(runs),
        )  # fmt: skip
        assert run.returncode == 0, output(run)
        for top in (root, runs):
            open_to_all = [
                p for p in (top, *top.rglob("*"))
                if not p.is_symlink() and p.stat().st_mode & 0o002
            ]  # fmt: skip
            assert open_to_all == [], open_to_all


def test_status_with_toxiproxy_dead_lists_no_link_as_listening_nor_claims_no_leftovers() -> None:
    with stack_folder() as root:
        up(root, "redis")
        Stack.attach(root).link("probe", "redis")  # as a run makes its links
        _kill(root, "toxiproxy")
        status = driftlab("status", "--dir", str(root))
        said = output(status)
        assert status.returncode == 3, said
        assert "links: none listening (1 made), toxiproxy is not running" in said, said
        assert "listens on" not in said
        assert "leftovers not checked: toxiproxy is not running" in said, said
        assert "no leftovers" not in said
