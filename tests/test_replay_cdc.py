"""Replay of the CDC pipeline's schedules on real PostgreSQL + Debezium + Kafka +
consumer process + Redis, judged by the reference checkers: the commit-before-apply
loss (`cdc-commit-before`), the counter's double count (`cdc-counter`) and a consumer
crash on the outbox's pipeline (`outbox`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_counts import run_events
from replay_support import explored, judged, simulated

from driftlab.harness.app.replay import replay
from driftlab.harness.lab.explore.schedule import Step
from driftlab.harness.lab.services.stack import Stack

pytestmark = [pytest.mark.services, pytest.mark.slow]


def test_commit_before_apply_loss_replays_on_the_cdc_pipeline(stack: Stack, tmp_path: Path) -> None:
    stack.up("postgres", "redis", "kafka", "connect")
    schedule = explored("commit-before-apply-loses", seed=5)
    run_dir = replay(schedule, runs_dir=tmp_path, seed=5, stack=stack)

    events = run_events(run_dir)
    msgs = [(e.action, e.value) for e in events if e.type == "msg" and e.action != "produce"]
    polled = [s.value for s in schedule.steps if s.action == "poll"]
    # The forced steps: the scheduled message was received by the first instance, whose
    # commit moved past it before the SIGKILL; nothing of it was ever applied.
    first = [e for e in events if e.type == "msg" and (e.process or "").endswith("#1")]
    assert [e.value for e in first if e.action == "deliver"] == polled
    assert any(e.action == "commit" for e in first)
    assert ("apply", polled[0]) not in msgs
    assert "lost-write" in judged(schedule, run_dir)


def test_counter_double_counts_a_change_redelivered_after_a_crash(
    stack: Stack, tmp_path: Path
) -> None:
    stack.up("postgres", "redis", "kafka", "connect")
    schedule = explored("counter-double-counts", seed=1)
    run_dir = replay(schedule, runs_dir=tmp_path, seed=1, stack=stack)

    # The first instance applied the change and died before committing it; the next
    # instance received it again and counted it again.
    applies = [e.process for e in run_events(run_dir) if e.type == "msg" and e.action == "apply"]
    assert len(applies) == 2 and applies[0] != applies[1]
    assert "duplicate-apply" in judged(schedule, run_dir)


def test_outbox_consumer_crash_redelivers_without_double_effect(
    stack: Stack, tmp_path: Path
) -> None:
    stack.up("postgres", "redis", "kafka", "connect")
    # The outbox holds (C14): the simulator finds no break to save, so the schedule is
    # fixed: a change received and applied, then the consumer dies before committing.
    steps = [
        Step("db-write", "c1", "k1"),
        *[Step("poll", "g", partition=p) for p in (0, 1)],
        Step("apply", "g"),
        Step("crash", "g"),
    ]
    schedule = simulated("outbox", steps)
    assert {a["kind"] for a in schedule.anomalies} == {"duplicate-delivery"}
    run_dir = replay(schedule, runs_dir=tmp_path, stack=stack)

    assert "duplicate-delivery" in judged(schedule, run_dir)


def test_a_cut_redis_link_holds_the_apply_until_it_heals(stack: Stack, tmp_path: Path) -> None:
    stack.up("postgres", "redis", "kafka", "connect")
    steps = [
        Step("db-write", "c1", "k1"),
        *[Step("poll", "g", partition=p) for p in (0, 1)],
        Step("partition", target="g->cache"),
        Step("apply", "g"),  # not enabled while the link is cut: the simulator skips it
        Step("heal"),
        Step("apply", "g"),
        Step("commit", "g"),
    ]
    schedule = simulated("cdc", steps)
    assert [s.action for s in schedule.steps].count("apply") == 1
    assert schedule.anomalies == []
    run_dir = replay(schedule, runs_dir=tmp_path, stack=stack)

    events = run_events(run_dir)
    faults = [(e.phase, e.target) for e in events if e.type == "fault"]
    assert faults == [("start", "consumer->redis"), ("stop", "consumer->redis")]
    healed = next(i for i, e in enumerate(events) if e.type == "fault" and e.phase == "stop")
    (apply,) = [i for i, e in enumerate(events) if e.type == "msg" and e.action == "apply"]
    assert apply > healed
    judged(schedule, run_dir)
