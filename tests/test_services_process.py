"""Process supervision on real OS processes: groups, signals, logs, parent death."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.ports import free_port, port_is_free, wait_port_free
from driftlab.harness.lab.services.process import (
    ProcessRecord,
    SupervisedProcess,
    group_alive,
    read_start_time,
)

# A leader that forks a helper into its own group, like a server with workers.
LEADER_WITH_HELPER = ["sh", "-c", "sleep 300 & echo helper=$!; echo leader' 'up; wait"]


def _proc_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()[0]


def test_kill_takes_the_whole_group(tmp_path: Path) -> None:
    proc = SupervisedProcess("t", LEADER_WITH_HELPER, tmp_path / "t.log")
    record = proc.start()
    proc.wait_until(lambda: "leader up" in proc.log_tail(), 5, "the leader's banner")
    helper = int(re.search(r"helper=(\d+)", proc.log_tail()).group(1))  # type: ignore[union-attr]
    assert os.getpgid(helper) == record.pgid
    proc.kill()
    assert not proc.is_running()
    assert read_start_time(helper) is None
    assert not group_alive(record.pgid)


def test_pause_freezes_and_resume_releases(tmp_path: Path) -> None:
    proc = SupervisedProcess("t", ["sleep", "300"], tmp_path / "t.log")
    proc.start()
    assert proc.pid is not None
    proc.pause()
    time.sleep(0.1)
    assert _proc_state(proc.pid) == "T"
    assert proc.is_running()
    proc.resume()
    time.sleep(0.1)
    assert _proc_state(proc.pid) == "S"
    proc.stop()
    assert not proc.is_running()


def test_stop_escalates_when_sigterm_is_ignored(tmp_path: Path) -> None:
    proc = SupervisedProcess(
        "stubborn",
        ["sh", "-c", "trap '' TERM; echo re''ady; while :; do sleep 0.1; done"],
        tmp_path / "s.log",
        stop_timeout=0.5,
    )
    record = proc.start()
    proc.wait_until(lambda: "ready" in proc.log_tail(), 5, "ready")
    started = time.monotonic()
    proc.stop()
    assert time.monotonic() - started < 5
    assert not group_alive(record.pgid)
    assert "did not stop within" in proc.log_tail()


def test_early_exit_quotes_the_log(tmp_path: Path) -> None:
    proc = SupervisedProcess(
        "broken", ["sh", "-c", "echo 'FATAL: bad config line 3'; exit 3"], tmp_path / "b.log"
    )
    proc.start()
    with pytest.raises(ServiceError) as err:
        proc.wait_for_port(free_port(), timeout=5)
    message = str(err.value)
    assert "broken: exited (status 3)" in message
    assert "FATAL: bad config line 3" in message
    assert str(tmp_path / "b.log") in message


def test_timeout_names_what_was_awaited(tmp_path: Path) -> None:
    proc = SupervisedProcess("idle", ["sleep", "300"], tmp_path / "i.log")
    proc.start()
    port = free_port()
    try:
        # The probe's last error is named: here the refused connection.
        awaited = rf"^idle: not ready after 1s waiting for a listener on 127\.0\.0\.1:{port}"
        refused = r"; last error: \[Errno 111\] Connection refused\n"
        with pytest.raises(ServiceError, match=awaited + refused):
            proc.wait_for_port(port, timeout=1)
    finally:
        proc.stop()


def test_adopted_process_is_signalled_by_record(tmp_path: Path) -> None:
    owner = SupervisedProcess("t", LEADER_WITH_HELPER, tmp_path / "t.log")
    record = owner.start()
    owner.wait_until(lambda: "leader up" in owner.log_tail(), 5, "the leader's banner")
    adopted = SupervisedProcess.adopt("t", ProcessRecord.from_json(record.to_json()))
    assert adopted.is_running()
    adopted.stop(timeout=5)
    assert not group_alive(record.pgid)
    owner.kill()  # reaps the zombie leader


def test_stale_record_is_not_running(tmp_path: Path) -> None:
    proc = SupervisedProcess("t", ["sleep", "300"], tmp_path / "t.log")
    record = proc.start()
    stale = ProcessRecord(record.pid, record.pgid, record.start_time - 1, record.log_path)
    assert not SupervisedProcess.adopt("t", stale).is_running()
    proc.kill()


def test_child_dies_with_its_sigkilled_parent(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from driftlab.harness.lab.services.process import SupervisedProcess
        p = SupervisedProcess("c", ["sleep", "300"], Path({str(tmp_path / "c.log")!r}),
                              die_with_parent=True)
        print(p.start().pid, flush=True)
        time.sleep(300)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert read_start_time(child) is not None
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while read_start_time(child) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert read_start_time(child) is None


def test_a_child_launched_from_a_short_lived_thread_outlives_it(tmp_path: Path) -> None:
    proc = SupervisedProcess("t", ["sleep", "300"], tmp_path / "t.log", die_with_parent=True)
    starter = threading.Thread(target=proc.start)
    starter.start()
    starter.join()
    time.sleep(0.3)  # a parent-death signal tied to the finished thread would have fired
    try:
        assert proc.is_running()
    finally:
        proc.kill()


def test_free_ports_are_distinct_bindable_and_below_ephemeral() -> None:
    ports = {free_port() for _ in range(20)}
    assert len(ports) == 20
    assert all(20000 <= p < 32000 for p in ports)
    with socket.socket() as sock:
        port = free_port()
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert not port_is_free(port)
        assert not wait_port_free(port, timeout=0.2)
        assert not port_is_free(port, allow_time_wait=True)  # a listener is not TIME_WAIT
    assert wait_port_free(port, timeout=2)
