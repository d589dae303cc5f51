"""The stack as a whole: no orphans when its owner dies, `driftlab down` after a crash,
the state file, and the errors for a missing program."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from driftlab.harness.cli import app
from driftlab.harness.lab.services import binaries
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.binaries import Binary, find_binary
from driftlab.harness.lab.services.ports import port_is_free
from driftlab.harness.lab.services.process import read_start_time
from driftlab.harness.lab.services.stack import Stack

pytestmark = pytest.mark.services

OWNER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from driftlab.harness.lab.services.stack import Stack
    stack = Stack(Path(sys.argv[1]), owned=sys.argv[2] != "free", temporary=sys.argv[2] == "temp")
    stack.up(*sys.argv[3].split(","))
    stack.link("app", "postgres" if "postgres" in sys.argv[3] else "redis")
    print("READY", flush=True)
    time.sleep(600)
    """
)


@pytest.fixture
def stack_dir() -> Iterator[Path]:
    # Not tmp_path: PostgreSQL's unprivileged account must enter every parent folder.
    root = Path(tempfile.mkdtemp(prefix="driftlab-stack-test-", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _start_owner(
    root: Path, owned: bool, services: str, temporary: bool = False
) -> subprocess.Popen[str]:
    kind = "temp" if temporary else "owned" if owned else "free"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(root), kind, services],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert owner.stdout is not None
    line = owner.stdout.readline()
    if line.strip() != "READY":
        owner.kill()
        pytest.fail(f"the stack owner did not start: {line}{owner.stdout.read()}")
    return owner


def _recorded(root: Path) -> tuple[list[tuple[int, int]], list[int]]:
    """(pid, start time) of every recorded process, and every port of the stack."""
    state = json.loads((root / "stack.json").read_text())
    procs = [
        (r["pid"], r["start_time"])
        for s in state["services"].values()
        for r in s["processes"].values()
    ]
    ports = [p for s in state["services"].values() for p in s["spec"]["ports"].values()]
    ports += [link["port"] for link in state["links"].values()]
    return procs, ports


def _wait_all_gone(procs: list[tuple[int, int]], ports: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [pid for pid, start in procs if read_start_time(pid) == start]
        # TIME_WAIT left by killed connections does not hold a port (SO_REUSEADDR).
        held = [port for port in ports if not port_is_free(port, allow_time_wait=True)]
        if not alive and not held:
            return
        time.sleep(0.2)
    pytest.fail(f"left behind: processes {alive}, ports {held}")


def _stack_processes(root: Path) -> list[str]:
    """Command lines of any process mentioning the stack folder (helpers included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and read_start_time(int(entry.name)) is not None:
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(root) in cmdline and "reaper" not in cmdline:
                found.append(f"{entry.name}: {cmdline}")
    return found


@pytest.mark.slow
def test_sigkilled_owner_leaves_no_service_or_port(stack_dir: Path) -> None:
    owner = _start_owner(stack_dir, owned=True, services="postgres,redis,rabbitmq,nats")
    procs, ports = _recorded(stack_dir)
    assert len(procs) == 6  # toxiproxy, postgres, redis, rabbitmq + its epmd, nats
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    _wait_all_gone(procs, ports, timeout=15)
    assert _stack_processes(stack_dir) == []


def test_down_stops_a_stack_whose_harness_died(stack_dir: Path) -> None:
    # As after `driftlab up`: the services outlive their starter, even a SIGKILLed one.
    owner = _start_owner(stack_dir, owned=False, services="redis,nats")
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    procs, ports = _recorded(stack_dir)
    assert all(read_start_time(pid) == start for pid, start in procs)
    runner = CliRunner()
    status = runner.invoke(app, ["status", "--dir", str(stack_dir)])
    assert status.exit_code == 0, status.output
    assert status.output.count("healthy") == 3
    down = runner.invoke(app, ["down", "--dir", str(stack_dir)])
    assert down.exit_code == 0, down.output
    _wait_all_gone(procs, ports, timeout=10)
    after = runner.invoke(app, ["status", "--dir", str(stack_dir)])
    assert after.exit_code == 3
    assert after.output.count("stopped") == 3


def test_a_sigkilled_owner_of_a_temporary_stack_leaves_no_folder(stack_dir: Path) -> None:
    # As a run's own stack in /tmp: a SIGKILLed run once left its ~42 MB folder behind.
    owner = _start_owner(stack_dir, owned=True, services="redis", temporary=True)
    procs, ports = _recorded(stack_dir)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    _wait_all_gone(procs, ports, timeout=15)
    deadline = time.monotonic() + 30
    while stack_dir.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not stack_dir.exists()


def _wait_for_process(root: Path, marker: str, timeout: float) -> int:
    """The pid of a process of the stack in `root` whose command line holds `marker`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in _stack_processes(root):
            if marker in line:
                return int(line.split(":", 1)[0])
        time.sleep(0.05)
    pytest.fail(f"no process with {marker} in {root} within {timeout:.0f} s")


@pytest.mark.slow
def test_a_run_killed_while_kafka_formats_its_storage_leaves_no_folder(stack_dir: Path) -> None:
    # A run SIGKILLed a few seconds into its own stack's start: Kafka's storage format (a
    # one-off JVM, in no state file) outlived it, and once in four wrote its meta files
    # while the reaper was removing the folder, which stayed, holding them. Held
    # stopped here, the format would write them after the reaper is done: it must die
    # with the run instead.
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(stack_dir), "temp", "kafka"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    formatter = None
    try:
        # The format's main class and arguments are in its @argfile (they hold a password).
        formatter = _wait_for_process(stack_dir, "@" + str(stack_dir), timeout=120)
        os.kill(formatter, signal.SIGSTOP)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 30
        while stack_dir.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not stack_dir.exists()
        assert read_start_time(formatter) is None, "the storage format outlived its run"
    finally:
        owner.kill()
        if formatter is not None and read_start_time(formatter) is not None:
            os.kill(formatter, signal.SIGKILL)


@pytest.mark.slow
def test_down_stops_a_dead_stack_with_connect(stack_dir: Path) -> None:
    # Attaching used to ask the dead Toxiproxy for Connect's link to Kafka, and
    # `driftlab down --dir` failed with "toxiproxy did not answer".
    owner = _start_owner(stack_dir, owned=True, services="redis,kafka,connect")
    procs, ports = _recorded(stack_dir)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    _wait_all_gone(procs, ports, timeout=30)
    down = CliRunner().invoke(app, ["down", "--dir", str(stack_dir)])
    assert down.exit_code == 0, down.output
    assert "nothing (already down)" in down.output


def test_state_file_reattaches_with_same_credentials(stack_dir: Path) -> None:
    stack = Stack(stack_dir, owned=True)
    try:
        stack.up("redis")
        link = stack.link("app", "redis")
        mode = stat.S_IMODE(os.stat(stack.state_path).st_mode)
        assert mode == 0o600  # it holds the passwords
        again = Stack.attach(stack_dir)
        assert again.endpoint("redis") == stack.endpoint("redis")
        assert again.links_made["app->redis"]["port"] == link.port
        assert again.is_up()
        # Restarting the stack after down keeps the credentials (the data depends on them).
        stack.down()
        assert not again.is_up()
        stack.up("redis")
        assert stack.endpoint("redis").extra == again.endpoint("redis").extra
    finally:
        stack.down()


def test_a_link_survives_a_toxiproxy_restart_on_its_port(stack_dir: Path) -> None:
    stack = Stack(stack_dir, owned=True)
    try:
        stack.up("redis")
        before = stack.link("app", "redis")
        toxiproxy = stack["toxiproxy"]
        toxiproxy.kill()
        toxiproxy.start()
        toxiproxy.wait_healthy(10)
        # Toxiproxy keeps no proxies across restarts; the stack gives them back.
        assert [link.name for link in stack.links.list()] == ["app->redis"]
        assert stack.links.missing() == []
        after = stack.link("app", "redis")
        assert after == before
        client = redis.Redis(
            host=after.host, port=after.port, password=after.extra["password"], socket_timeout=3
        )
        assert client.ping()
    finally:
        stack.down()


def test_missing_program_names_its_install_command(
    stack_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(stack_dir))  # an empty folder
    with pytest.raises(ServiceError, match="install it with `apt-get install redis-server`"):
        find_binary("redis-server")
    monkeypatch.setitem(
        binaries.BINARIES,
        "driftlab-toxiproxy",
        Binary("driftlab-toxiproxy", "bash scripts/bootstrap", (stack_dir,), on_path=False),
    )
    message = _refused(stack_dir / "stack", "nats")
    assert "driftlab-toxiproxy not found" in message
    assert "`bash scripts/bootstrap`" in message


def _refused(root: Path, service: str) -> str:
    """What a stack in `root` says when it cannot start `service`."""
    stack = Stack(root, owned=True)
    try:
        with pytest.raises(ServiceError) as err:
            stack.up(service)
    finally:
        stack.down()
    return str(err.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs PostgreSQL as another user")
def test_a_stack_folder_postgres_cannot_enter_is_refused_with_the_fix(stack_dir: Path) -> None:
    private = stack_dir / "private"
    private.mkdir(mode=0o700)
    message = _refused(private / "stack", "postgres")
    assert f"cannot enter {private}" in message
    assert f"chmod o+x {private}" in message


def test_unknown_service_is_named(stack_dir: Path) -> None:
    with pytest.raises(ServiceError, match="unknown service 'mysql'; known services: "):
        Stack(stack_dir).up("mysql")
    result = CliRunner().invoke(app, ["up", "--only", "mysql", "--dir", str(stack_dir)])
    assert result.exit_code == 2  # bad input, not a verdict
    assert "unknown service(s) mysql" in result.output
