"""CommandProcess: any command line as a supervised service the nemesis can crash,
pause and restart, ready by a log line, a TCP port or an HTTP URL."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.command import CommandProcess, Readiness
from driftlab.harness.lab.services.ports import free_port
from driftlab.harness.lab.services.process import group_alive, read_start_time


def state_of(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()[0]


def test_shell_pipeline_ready_by_log_line_then_killed_as_a_group(tmp_path: Path) -> None:
    # The script forks a child (sleep) as a real consumer forks psql: the crash must
    # take the whole group, and a restart is a new instance.
    script = 'echo "starting"; sleep 0.3; echo "ready $INSTANCE_NOTE"; sleep 300 & wait'
    proc = CommandProcess(
        "worker",
        ["bash", "-c", script],
        tmp_path / "logs" / "worker.log",
        env={**os.environ, "INSTANCE_NOTE": "now"},
        cwd=tmp_path,
        ready=Readiness(log=r"^ready now$"),
    )
    proc.start()
    proc.wait_healthy(10)
    assert proc.instance == "worker-i1"
    assert proc.process is not None and proc.process.record is not None
    pgid = proc.process.record.pgid
    assert group_alive(pgid)
    proc.kill()
    assert not proc.is_running() and not group_alive(pgid)
    proc.start()
    proc.wait_healthy(10)
    assert proc.instance == "worker-i2"
    # Readiness reads only what this instance logged: both starts are in the log.
    assert (tmp_path / "logs" / "worker.log").read_text().count("ready now") == 2
    proc.stop()
    assert not proc.is_running()


def test_a_log_pattern_matches_one_line_the_process_printed(tmp_path: Path) -> None:
    # `^ready$` is a line that is exactly "ready"; the harness's own note at the top of
    # the log quotes the command line, a script of several lines, one of them `ready`
    # once the `echo ` is cut: the note is one line, and never counts.
    script = "echo 'not ready yet'\nsleep 1.5\necho ready\nsleep 300"
    proc = CommandProcess(
        "exact",
        ["bash", "-c", script],
        tmp_path / "exact.log",
        ready=Readiness(log="^ready$"),
    )
    proc.start()
    try:
        with pytest.raises(ServiceError, match=r"exact-i1: the log line /\^ready\$/"):
            proc.wait_healthy(0.8)
        proc.wait_healthy(10)
        assert proc.logged().splitlines()[-1] == "ready"
    finally:
        proc.stop()


def test_pause_and_resume_act_on_the_group(tmp_path: Path) -> None:
    proc = CommandProcess("sleeper", ["sleep", "60"], tmp_path / "sleeper.log")
    proc.start()
    proc.wait_healthy(5)
    assert proc.process is not None and proc.process.pid is not None
    pid = proc.process.pid
    proc.pause()
    deadline = time.monotonic() + 5
    while state_of(pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert state_of(pid) == "T"
    proc.resume()
    while state_of(pid) == "T" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert state_of(pid) in ("S", "R")
    proc.stop()
    assert read_start_time(pid) is None


def test_ready_by_tcp_port_and_by_http_url(tmp_path: Path) -> None:
    port = free_port()
    server = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    by_tcp = CommandProcess("web", server, tmp_path / "web.log", ready=Readiness(tcp=port))
    by_tcp.start()
    try:
        by_tcp.wait_healthy(15)
        assert by_tcp.endpoint().port == port
    finally:
        by_tcp.stop()
    url = f"http://127.0.0.1:{port}/"
    by_http = CommandProcess("web", server, tmp_path / "web.log", ready=Readiness(http=url))
    by_http.start()
    try:
        by_http.wait_healthy(15)
    finally:
        by_http.stop()


def test_a_process_that_exits_before_ready_quotes_its_log(tmp_path: Path) -> None:
    proc = CommandProcess(
        "broken",
        ["bash", "-c", "echo 'cannot connect to postgres' >&2; exit 4"],
        tmp_path / "broken.log",
        ready=Readiness(log="ready"),
    )
    proc.start()
    with pytest.raises(ServiceError, match=r"(?s)exited.*cannot connect to postgres"):
        proc.wait_healthy(10)
