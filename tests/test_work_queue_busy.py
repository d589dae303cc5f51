"""A `when: busy` crash of a work-queue worker strikes while it holds applied, unacked
messages (C7): the count the worker publishes, on the real RabbitMQ and Redis, and the
freeze that keeps it in that state for the kill (a crash at a fixed time once struck
just after an ack: the worker held only its newest message, and nothing was reordered).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from setup_fixtures import make_context, running

from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.architectures.work_queue import worker as wq_worker
from driftlab.scenarios.architectures.work_queue.setup import QueueWorker, WorkQueue

pytestmark = pytest.mark.services

ACK_MS = 60_000
"""No ack within a test (the first is due 30-90 s after the worker starts; a graceful
stop acks what it holds): a worker keeps what it applied."""


def _frozen(w: QueueWorker) -> bool:
    """Whether the worker's process is stopped (SIGSTOP), by the kernel's account."""
    assert w.process is not None and w.process.record is not None
    stat = Path(f"/proc/{w.process.record.pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


@pytest.fixture
def queue(stack: Stack, tmp_path: Path) -> Iterator[WorkQueue]:
    """The setup with one worker that acks every ACK_MS, started on the real stack."""
    setup = WorkQueue()
    with running(
        setup, stack, tmp_path, "wq-busy", workers=1, work_ms=0, ack_ms=ACK_MS, busy_unacked=3
    ):
        yield setup


def _write(setup: WorkQueue, n: int) -> None:
    client = setup.client("c0")
    for i in range(n):
        client.write(f"k{i}", f"v{i}")
    client.close()


def test_a_worker_is_busy_while_it_holds_applied_unacked_messages(queue: WorkQueue) -> None:
    """Not busy with nothing to do, nor below `busy_unacked` messages; busy from
    there on (that its ack makes it idle again: the last test)."""
    w = queue.workers["worker-0"]
    assert w.status().get("unacked") == 0 and not w.busy()
    _write(queue, 2)
    assert wait_until(lambda: w.status().get("unacked") == 2, 5, interval=0.01)
    assert not w.busy()  # fewer than busy_unacked
    _write(queue, 2)
    assert wait_until(w.busy, 5, interval=0.01)  # from the third on
    assert wait_until(lambda: w.status().get("unacked") == 4, 5, interval=0.01)
    assert w.busy()


def test_a_busy_worker_is_held_frozen_and_its_kill_strands_what_it_held(
    queue: WorkQueue,
) -> None:
    """Held for the crash, the worker stays stopped; the kill hands every message it
    applied back to the broker, which holds them for the next consumer."""
    w = queue.workers["worker-0"]
    _write(queue, 4)
    assert wait_until(lambda: w.status().get("unacked") == 4, 5, interval=0.01)
    assert w.hold_if_busy()
    assert wait_until(lambda: _frozen(w), 2, interval=0.01)  # SIGSTOP takes a moment
    assert w.busy() and w.status()["unacked"] == 4
    w.kill()
    assert wait_until(lambda: queue.depth().message_count == 4, 10, interval=0.1)
    w.start()  # the next instance takes them again: teardown stops it gracefully
    w.wait_healthy()


def test_a_worker_not_busy_is_not_held(queue: WorkQueue) -> None:
    """Nothing unacked (or fewer than `busy_unacked`): it runs on, not frozen."""
    w = queue.workers["worker-0"]
    assert not w.hold_if_busy()
    assert not _frozen(w)
    _write(queue, 1)
    assert wait_until(lambda: w.status().get("unacked") == 1, 5, interval=0.01)
    assert not w.hold_if_busy()
    assert not _frozen(w)


def test_a_worker_says_it_holds_nothing_before_its_ack_leaves(stack: Stack, tmp_path: Path) -> None:
    """Frozen between its ack and its next status, a worker would look busy with every
    message acked, and its kill would strand nothing: the count goes out first. The
    worker runs in this process, on the setup's real queue, its channel's acks watched
    on their way to the broker."""
    stack.up(*WorkQueue.services)
    setup = WorkQueue()
    ctx = make_context(stack, tmp_path, "wq-busy-ack", workers=1, work_ms=0, ack_ms=ACK_MS)
    setup.prepare(ctx)
    proc = setup.workers["worker-0"]
    proc.instance = "worker-0-i1"
    proc.status_path.parent.mkdir(parents=True, exist_ok=True)  # made by a start
    cfg: dict[str, Any] = {
        **proc.config,
        "name": proc.name,
        "instance": proc.instance,
        "run_dir": str(ctx.work_dir),
        "status_path": str(proc.status_path),
    }
    worker = wq_worker.Worker(cfg)
    seen: list[tuple[int, int]] = []  # (status's unacked, in memory) as each ack leaves
    basic_ack = worker.channel.basic_ack

    def watched(tag: int, multiple: bool = False) -> None:
        seen.append((proc.status()["unacked"], len(worker.unacked)))
        basic_ack(tag, multiple=multiple)

    worker.channel.basic_ack = watched  # type: ignore[method-assign]
    try:
        worker.channel.basic_consume(setup.queue, worker.on_message, auto_ack=False)
        _write(setup, 3)
        deadline = time.monotonic() + 5
        while len(worker.unacked) < 3 and time.monotonic() < deadline:
            worker.connection.process_data_events(time_limit=0.05)
        assert proc.status()["unacked"] == 3  # told as each was applied
        worker.ack_due(force=True)
        assert seen == [(0, 0)]
        # The broker took the ack: nothing is left for another consumer.
        worker.connection.close()
        assert wait_until(lambda: setup.depth().consumer_count == 0, 5, interval=0.05)
        assert setup.depth().message_count == 0
    finally:
        if worker.connection.is_open:
            worker.connection.close()
        worker.rec.close()
        ctx.recorder.close()  # type: ignore[attr-defined]


def test_busy_unacked_beyond_the_prefetch_names_the_fix(tmp_path: Path) -> None:
    ctx = make_context(object(), tmp_path, "wq-busy-bad", prefetch=4, busy_unacked=5)
    with pytest.raises(ValueError, match=r"busy_unacked must be in 1..prefetch \(4\)"):
        WorkQueue().prepare(ctx)
