"""The recorder loses nothing across threads and processes, and little on SIGKILL."""

from __future__ import annotations

import errno
import json
import mmap
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from driftlab.harness.history.errors import HistoryError
from driftlab.harness.history.reader import read_history
from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.schema import Event, RunHeader
from driftlab.harness.history.values import UniqueValues, split_value

ROOT = Path(__file__).resolve().parents[1]
HEADER = RunHeader(run_id="r-test", scenario="unit", seed=7, params={"keys": 3})


def _rows_by_writer(table: pa.Table) -> dict[str, list[dict]]:
    by_writer: dict[str, list[dict]] = defaultdict(list)
    for row in table.to_pylist():
        by_writer[row["writer"]].append(row)
    return by_writer


def _assert_writer_order(table: pa.Table) -> None:
    """Per writer: seq is 0..n-1 with no gap, and sorting by time keeps seq order."""
    for writer, rows in _rows_by_writer(table).items():
        seqs = [r["seq"] for r in rows]
        assert seqs == list(range(len(rows))), f"{writer}: seq gaps or disorder"
        assert rows[0]["type"] == "header"


def test_every_convenience_method_writes_its_columns(tmp_path: Path) -> None:
    with Recorder(tmp_path, HEADER, role="client") as rec:
        op_id = rec.invoke("c1", "write", key="k1", value="c1-1", store="source")
        rec.complete(op_id, "ok", version=4)
        read_id = rec.invoke("c1", "read", key="k1", store="cache")
        rec.complete(read_id, "info", error="timeout")
        rec.msg(
            "deliver",
            channel="t",
            msg_id="m1",
            key="k1",
            value="c1-1",
            version=4,
            partition=2,
            offset=9,
            consumer="g",
            process="c2",
            attempt=2,
            source_pos=77,
        )
        fault_id = rec.fault_start("partition", "kafka", extra={"ms": 500})
        rec.fault_stop(fault_id)
        rec.state("source", "k1", "c1-1", version=4)
        rec.record(Event(type="mark", kind="quiesced", time=12345))
        rec.end()
    history = read_history(tmp_path)
    rows = history.table.to_pylist()
    by_type = defaultdict(list)
    for r in rows:
        by_type[r["type"]].append(r)
    assert history.info.complete and not history.info.cut_short
    assert history.info.header == HEADER
    ops = by_type["op"]
    assert [(o["phase"], o["f"], o["value"], o["version"]) for o in ops] == [
        ("invoke", "write", "c1-1", None),
        ("ok", "write", "c1-1", 4),
        ("invoke", "read", None, None),
        ("info", "read", None, None),
    ]
    assert ops[0]["op_id"] == ops[1]["op_id"] != ops[2]["op_id"] == ops[3]["op_id"]
    assert ops[3]["error"] == "timeout" and ops[3]["store"] == "cache"
    (msg,) = by_type["msg"]
    assert (msg["partition"], msg["offset"], msg["attempt"], msg["source_pos"]) == (2, 9, 2, 77)
    start, stop = by_type["fault"]
    assert (start["phase"], stop["phase"]) == ("start", "stop")
    assert start["fault_id"] == stop["fault_id"] and stop["target"] == "kafka"
    assert json.loads(start["extra"]) == {"ms": 500}
    assert by_type["state"][0]["version"] == 4
    assert [m["kind"] for m in by_type["mark"]] == ["quiesced", "end"]
    assert by_type["mark"][0]["time"] == 12345  # a given time is kept
    # The mark with the given early time sorts first; the rest keep their order.
    assert rows[0]["kind"] == "quiesced"


def test_bad_calls_are_refused(tmp_path: Path) -> None:
    with Recorder(tmp_path, HEADER) as rec:
        with pytest.raises(ValueError, match="op phase"):
            rec.op("c1", "done", "write")
        with pytest.raises(ValueError, match="msg action"):
            rec.msg("teleport")
        with pytest.raises(ValueError, match="unknown event type"):
            rec.record(Event(type="oops"))
        with pytest.raises(ValueError, match="not invoked"):
            rec.complete("nope", "ok")
        with pytest.raises(ValueError, match="completion phase"):
            rec.complete(rec.invoke("c1", "read"), "invoke")
        # Values the reader would refuse are refused at once, not after the run.
        with pytest.raises(TypeError, match="'value' must be a str, got 5"):
            rec.state("cache", "k", 5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="'offset' must be a 64-bit int, got True"):
            rec.msg("deliver", offset=True)
        with pytest.raises(TypeError, match="'version' must be a 64-bit int"):
            rec.state("cache", "k", "v", version=2**63)
        with pytest.raises(TypeError, match=r"'time' must be a 64-bit int, got 1\.5"):
            rec.record(Event(type="mark", kind="x", time=1.5))  # type: ignore[arg-type]
        rec.mark("after-refusals")
    table = read_history(tmp_path).table  # refused events took no seq: no gap
    _assert_writer_order(table)
    assert table.num_rows == 3  # header, the read's invoke, the mark
    with pytest.raises(HistoryError, match="closed"):
        rec.mark("late")
    with pytest.raises(HistoryError, match="no segment with a run header"):
        Recorder(tmp_path / "fresh")


def test_many_threads_lose_nothing_and_keep_seq_order(tmp_path: Path) -> None:
    threads_n, per_thread = 8, 4000
    rec = Recorder(tmp_path, HEADER, batch_size=64)

    def work(t: int) -> None:
        for i in range(per_thread):
            rec.msg("produce", channel="t", msg_id=f"{t}:{i}", partition=t, offset=i)

    # All threads at once; a worker's exception is raised here, not lost with its thread.
    with ThreadPoolExecutor(max_workers=threads_n) as pool:
        list(pool.map(work, range(threads_n)))
    rec.end()
    table = read_history(tmp_path).table
    msgs = [r for r in table.to_pylist() if r["type"] == "msg"]
    assert sorted(m["msg_id"] for m in msgs) == sorted(
        f"{t}:{i}" for t in range(threads_n) for i in range(per_thread)
    )
    _assert_writer_order(table)
    # Each thread's own events keep their order too.
    for t in range(threads_n):
        assert [m["offset"] for m in msgs if m["partition"] == t] == list(range(per_thread))


def test_forked_children_get_their_own_segments(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, HEADER, role="client")
    values = UniqueValues("c")
    children, per_process = 3, 3000
    pids = []
    for c in range(children):
        pid = os.fork()
        if pid == 0:  # the child: a new writer, segment and value prefix
            try:
                for _ in range(per_process):
                    rec.op(f"child{c}", "invoke", "write", key="k", value=values.next())
                rec.close()
            finally:
                os._exit(0)
        pids.append(pid)
    idle = os.fork()
    if idle == 0:  # a child that never records leaves no segment behind
        os._exit(0)
    pids.append(idle)
    for _ in range(per_process):
        rec.op("parent", "invoke", "write", key="k", value=values.next())
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    rec.end()
    history = read_history(tmp_path)
    assert history.info.segments == children + 1
    table = history.table
    _assert_writer_order(table)
    ops = [r for r in table.to_pylist() if r["type"] == "op"]
    assert len(ops) == per_process * (children + 1)
    assert len({o["value"] for o in ops}) == len(ops), "values repeat across processes"
    per_process_ops = defaultdict(list)
    for o in ops:
        per_process_ops[o["process"]].append(split_value(o["value"])[1])
    assert all(ns == list(range(1, per_process + 1)) for ns in per_process_ops.values())
    writers = {o["writer"] for o in ops}
    assert len(writers) == children + 1 and all(w.startswith("client-") for w in writers)


SPAWNED = textwrap.dedent(
    """
    import sys
    from driftlab.harness.history.recorder import Recorder
    with Recorder(sys.argv[1], role="consumer") as rec:
        for i in range(int(sys.argv[2])):
            rec.msg("apply", store="cache", key="k", msg_id=f"{sys.argv[3]}:{i}")
    """
)


def test_spawned_processes_join_the_run_concurrently(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, HEADER)
    n = 5000
    procs = [
        subprocess.Popen([sys.executable, "-c", SPAWNED, str(tmp_path), str(n), f"p{i}"], cwd=ROOT)
        for i in range(2)
    ]
    for i in range(n):
        rec.msg("produce", channel="t", msg_id=f"main:{i}")
    assert [p.wait(60) for p in procs] == [0, 0]
    rec.end()
    history = read_history(tmp_path)
    table = history.table
    assert history.info.segments == 3
    assert table.num_rows == 3 * n + 3 + 1  # events, three headers, the END mark
    _assert_writer_order(table)
    headers = [r for r in table.to_pylist() if r["type"] == "header"]
    assert {json.loads(h["extra"])["run_id"] for h in headers} == {"r-test"}


UNCLOSED = textwrap.dedent(
    """
    import sys
    from driftlab.harness.history.recorder import Recorder
    from driftlab.harness.history.schema import RunHeader
    rec = Recorder(sys.argv[1], RunHeader(run_id="x", scenario="x", seed=0),
                   batch_size=100_000, flush_interval=3600)
    for i in range(1000):
        rec.mark("tick")
    """
)


def test_an_unclosed_recorder_is_flushed_at_exit(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-c", UNCLOSED, str(tmp_path)], cwd=ROOT, check=True)
    history = read_history(tmp_path)
    assert history.info.events == 1001 and history.info.cut_short


def test_idle_events_reach_the_file_without_close(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, HEADER, batch_size=10_000, flush_interval=0.05)
    try:
        rec.mark("workload-done")
        deadline = time.monotonic() + 10
        while b"workload-done" not in rec.path.read_bytes():
            assert time.monotonic() < deadline, "the background flusher never wrote"
            time.sleep(0.02)
    finally:
        rec.close()


KILLED_CHILD = textwrap.dedent(
    """
    import mmap, os, struct, sys
    from driftlab.harness.history.recorder import Recorder
    from driftlab.harness.history.schema import RunHeader
    fd = os.open(sys.argv[2], os.O_RDWR)
    done = mmap.mmap(fd, 8)
    rec = Recorder(sys.argv[1], RunHeader(run_id="killed", scenario="kill", seed=1),
                   role="client", batch_size=int(sys.argv[3]))
    i = 0
    while True:
        rec.op("c1", "invoke", "write", key="k", value=str(i))
        i += 1
        struct.pack_into("<q", done, 0, i)  # events recorded so far
    """
)


def _wait_stopped(pid: int) -> None:
    """Wait until every thread of `pid` is stopped (signal delivery is asynchronous)."""
    deadline = time.monotonic() + 10
    tasks = Path(f"/proc/{pid}/task")
    while True:
        states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks.iterdir()]
        if all(s in "tT" for s in states):
            return
        assert time.monotonic() < deadline, f"process {pid} did not stop: {states}"
        time.sleep(0.001)


@pytest.mark.slow
def test_sigkill_loses_at_most_one_batch(tmp_path: Path) -> None:
    batch = 256
    counter = tmp_path / "counter"
    counter.write_bytes(b"\0" * 8)
    run = tmp_path / "run"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_CHILD, str(run), str(counter), str(batch)], cwd=ROOT
    )
    fd = os.open(counter, os.O_RDONLY)
    recorded = mmap.mmap(fd, 8, access=mmap.ACCESS_READ)
    try:
        deadline = time.monotonic() + 60
        while struct.unpack_from("<q", recorded, 0)[0] < 20 * batch + batch // 2:
            assert child.poll() is None, "the recording child died"
            assert time.monotonic() < deadline, "the child records too slowly"
            time.sleep(0.01)
        # Stop it first so the counter cannot move between reading it and the kill.
        os.kill(child.pid, signal.SIGSTOP)
        _wait_stopped(child.pid)
        count = struct.unpack_from("<q", recorded, 0)[0]
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        recorded.close()
        os.close(fd)
    history = read_history(run)
    assert history.info.cut_short and not history.info.complete
    values = [int(r["value"]) for r in history.table.to_pylist() if r["type"] == "op"]
    # What reached the file is an unbroken prefix of what the child recorded...
    assert values == list(range(len(values)))
    # ...short of it by less than one batch (the child may have been stopped between
    # recording an event and counting it, hence the +1).
    assert count - batch < len(values) <= count + 1, (count, len(values))


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs to fill it")
def test_a_full_disk_ends_the_history_cleanly_and_readably(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr!r}")
    try:
        rec = Recorder(disk / "run", RunHeader("r/1", "full", 1), batch_size=64)
        sent = 0
        while rec.failure is None and sent < 200_000:  # 256 KiB fill within a few thousand
            rec.op("c1", "invoke", "write", key=f"k{sent % 50}", value="v" * 40)
            sent += 1
        assert rec.failure is not None and rec.failure.errno == errno.ENOSPC
        rec.op("c1", "invoke", "write", key="after", value="dropped")  # no raise
        rec.close()  # no raise either
        kept = tmp_path / "kept"
        subprocess.run(["cp", "-a", str(disk / "run"), str(kept)], check=True)
    finally:
        subprocess.run(["umount", str(disk)], check=False)
    history = read_history(kept)
    ops = history.table.filter(pa.compute.equal(history.table["type"], "op"))
    assert 0 < ops.num_rows < sent
    assert "after" not in ops["key"].to_pylist()
    assert history.info.cut_short
