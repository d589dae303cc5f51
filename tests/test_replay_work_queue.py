"""Replay of Figure 11-2, as `driftlab explore amqp` finds it, on real RabbitMQ with
stepped worker processes and Redis, judged by the reference checkers."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_counts import run_events
from replay_support import explored, judged

from driftlab.harness.app.replay import replay
from driftlab.harness.lab.services.stack import Stack

pytestmark = pytest.mark.services


def test_redelivery_after_a_worker_crash_reorders_on_rabbitmq(stack: Stack, tmp_path: Path) -> None:
    stack.up("rabbitmq", "redis")
    schedule = explored("amqp-keeps-order", seed=0, examples=600)
    run_dir = replay(schedule, runs_dir=tmp_path, seed=0, stack=stack)

    events = run_events(run_dir)
    delivered: dict[str, list[str | None]] = {}
    for e in events:
        if e.type == "msg" and e.action == "deliver":
            delivered.setdefault(e.process or "", []).append(e.value)
    # The forced steps: each worker received the value the schedule polled, and the
    # message the crashed worker held went to the live one, after the newer value.
    polls = {s.actor: s.value for s in schedule.steps if s.action == "poll"}
    (crashed,) = [s.actor for s in schedule.steps if s.action == "crash"]
    (live,) = [w for w in polls if w != crashed]
    live_process = f"worker-{int(str(live)[1:]) - 1}-i1"
    assert delivered[live_process] == [polls[live], polls[crashed]]
    assert "reorder-delivery" in judged(schedule, run_dir)
