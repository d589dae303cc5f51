"""A `when: busy` crash of the CDC consumer strikes inside uncommitted work: what the
consumer publishes while an offset commit is on its way, and the nemesis's look at the
frozen instance before the kill (a loaded machine once killed a consumer seen busy
after it had committed the batch: nothing was delivered again, and C3 read zero)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from setup_fixtures import events, make_context

from driftlab.harness.lab.nemesis import FaultSpec, Nemesis, Schedule
from driftlab.harness.lab.services.base import Service
from driftlab.harness.lab.setups.worker_process import publish_status
from driftlab.scenarios.architectures.cdc import consumer as cdc_consumer
from driftlab.scenarios.architectures.cdc.processes import ConsumerProcess
from driftlab.scenarios.architectures.cdc.protocol import ConsumerConfig
from driftlab.scenarios.architectures.dual_write.setup import DualWrite

INSTANCE = "consumer-0#1"
APPLIED = {"instance": INSTANCE, "ready": True, "position": {"0": 9}, "committed": {"0": 4}}
"""Changes 4 to 8 applied, not committed: a crash now has them delivered again."""


def _config(tmp_path: Path, run_dir: Path) -> ConsumerConfig:
    return ConsumerConfig(
        instance=INSTANCE,
        group="g",
        topic="t",
        partitions=[0],
        kafka={"bootstrap.servers": "127.0.0.1:1"},
        redis_host="127.0.0.1",
        redis_port=1,  # never called
        redis_password="",
        prefix="",
        store="cache",
        run_dir=str(run_dir),
        status_path=str(tmp_path / "consumer-0.status.json"),
    )


class _Committer:
    """A BoundedCommitter's part the consumer uses: each commit lands at once (after
    `during`, called while it is on its way), or is abandoned and left pending."""

    def __init__(self, during: Callable[[], None], *, abandon: bool = False) -> None:
        self.during = during
        self.abandon = abandon

    def commit(self, offsets: list[TopicPartition]) -> list[TopicPartition]:
        self.during()
        if self.abandon:
            raise cdc_consumer.CommitTimeout("no answer")
        return offsets

    def pending(self) -> bool:
        return self.abandon

    def landed(self) -> list[TopicPartition]:
        return []


def test_a_consumer_is_not_busy_while_an_offset_commit_is_on_its_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the moment a commit leaves until its answer is taken in, Kafka may hold
    offsets the status does not: a kill then would deliver nothing again."""
    monkeypatch.setattr(cdc_consumer, "Consumer", lambda conf, logger: None)  # no Kafka
    ctx = make_context(object(), tmp_path, "cdc-busy")
    cfg = _config(tmp_path, ctx.work_dir)
    consumer = cdc_consumer.CdcConsumer(cfg)
    parent = ConsumerProcess("consumer-0", cfg, tmp_path)
    parent.instance = INSTANCE  # the instance the status names, as after its start
    consumer.committed, consumer.position = {0: 4}, {0: 9}
    consumer.write_status(force=True)
    assert parent.busy()  # applied, not committed

    seen: list[bool] = []
    consumer.committer = _Committer(lambda: seen.append(parent.busy()))  # type: ignore[assignment]
    assert consumer.commit_positions({0: 9})
    consumer.write_status(force=True)
    assert seen == [False]
    assert not parent.busy()  # all of it committed

    consumer.position = {0: 12}
    consumer.committer = _Committer(lambda: seen.append(parent.busy()), abandon=True)  # type: ignore[assignment]
    assert not consumer.commit_positions({0: 12})
    consumer.write_status(force=True)
    # Given up on, the commit may still land: not busy until it is taken in.
    assert seen == [False, False]
    assert not parent.busy()
    consumer.rec.close()
    ctx.recorder.close()  # type: ignore[attr-defined]


class _Racing(ConsumerProcess):
    """A consumer process with no OS process: its status file is the test's, and the
    first freeze lands after it moved on to `moved_on` (a status published between the
    nemesis's look and the SIGSTOP). `kill` notes whether it was busy when struck."""

    def __init__(self, tmp_path: Path, moved_on: dict[str, Any]) -> None:
        super().__init__("consumer-0", _config(tmp_path, tmp_path), tmp_path)
        self.instance = INSTANCE
        self.moved_on: dict[str, Any] | None = moved_on
        self.frozen = False
        self.resumed = 0
        self.struck: list[bool] = []

    def publish(self, status: dict[str, Any]) -> None:
        publish_status(str(self.status_path), status)

    def pause(self) -> None:
        if self.moved_on is not None:
            self.publish(self.moved_on)
            self.moved_on = None
        self.frozen = True

    def resume(self) -> None:
        self.frozen = False
        self.resumed += 1

    def kill(self) -> None:
        self.struck.append(self.frozen and self.busy())

    def start(self) -> None:
        """Nothing to start."""

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Nothing to wait for."""


class _OwnConsumer(DualWrite):
    def __init__(self, process: Service) -> None:
        super().__init__()
        self.own = process

    def process(self, name: str) -> Service | None:
        return self.own if name == "consumer" else None


@pytest.mark.parametrize(
    "moved_on",
    [
        APPLIED | {"position": {"0": 9}, "committed": {"0": 9}},  # committed since the look
        APPLIED | {"committing": True},  # its commit on its way
    ],
    ids=["committed", "committing"],
)
def test_a_busy_crash_strikes_the_work_it_saw_not_a_commit_later(
    tmp_path: Path, moved_on: dict[str, Any]
) -> None:
    """Seen busy, the consumer committed before the kill could land: the nemesis lets it
    run on and strikes at its next busy moment, frozen in it."""
    racing = _Racing(tmp_path, moved_on)
    racing.publish(APPLIED)
    ctx = make_context(object(), tmp_path, "cdc-busy-crash")
    spec = FaultSpec("crash", "consumer", 0.0, 0.2, {"when": "busy", "wait": 10.0})
    nemesis = Nemesis(Schedule((spec,)), _OwnConsumer(racing), ctx)
    nemesis.start()
    deadline = time.monotonic() + 5
    while not (racing.resumed or racing.struck) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert racing.struck == [] and racing.resumed == 1  # let run on, not struck
    racing.publish(APPLIED | {"position": {"0": 15}, "committed": {"0": 9}})  # the next batch
    while not racing.struck and time.monotonic() < deadline:
        time.sleep(0.01)
    nemesis.heal_all()
    assert racing.struck == [True]
    assert racing.resumed == 1  # the kill found it frozen
    (start,) = [e for e in events(ctx) if e["type"] == "fault" and e["phase"] == "start"]
    assert json.loads(str(start["extra"]))["busy"] is True
    assert nemesis.errors == []
    ctx.recorder.close()  # type: ignore[attr-defined]


def test_a_consumer_held_for_a_crash_that_failed_runs_on(tmp_path: Path) -> None:
    """Frozen for a kill that could not be made, the consumer is resumed."""

    class _Unkillable(_Racing):
        def kill(self) -> None:
            raise OSError("no such process group")

    held = _Unkillable(tmp_path, APPLIED)
    held.publish(APPLIED)
    ctx = make_context(object(), tmp_path, "cdc-busy-failed")
    spec = FaultSpec("crash", "consumer", 0.0, 0.2, {"when": "busy"})
    nemesis = Nemesis(Schedule((spec,)), _OwnConsumer(held), ctx)
    nemesis.start()
    deadline = time.monotonic() + 5
    while not nemesis.errors and time.monotonic() < deadline:
        time.sleep(0.01)
    nemesis.heal_all()
    assert nemesis.errors and "no such process group" in nemesis.errors[0]
    assert not held.frozen and held.resumed == 1
    ctx.recorder.close()  # type: ignore[attr-defined]
