"""A lab client's call through a cut link gives up at its client-side timeout with an
unknown outcome, instead of hanging until the link heals: PostgreSQL statements,
Redis calls, RabbitMQ confirmed publishes and Kafka offset commits."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pika
import psycopg
import pytest
import redis
from confluent_kafka import Consumer, TopicPartition
from psycopg import sql
from setup_fixtures import events, make_context

from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.kafka_admin import TopicSpec, create_topics
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.setups.connect import (
    AMQP_HEARTBEAT_S,
    KAFKA_CLIENT_TIMEOUTS,
    PG_STATEMENT_TIMEOUT_S,
    BoundedCommitter,
    CommitTimeout,
    StatementTimeout,
    TimedConnection,
    app_pg_connect,
    pg_conninfo,
    redis_client,
)
from driftlab.harness.lab.setups.stores import classify_pg
from driftlab.scenarios.architectures.cdc.consumer import CdcConsumer
from driftlab.scenarios.architectures.cdc.protocol import BEFORE_APPLY, ConsumerConfig
from driftlab.scenarios.architectures.event_sourced.projector import Projector
from driftlab.scenarios.architectures.event_sourced.setup import LIVE, PROJECTOR, EventSourced
from driftlab.scenarios.architectures.work_queue.setup import amqp_parameters

pytestmark = pytest.mark.services

GUARD_S = 60.0
"""When the guard heals the link: a call still waiting then had no timeout of its own."""


@contextlib.contextmanager
def cut_with_guard(stack: Stack, link: str) -> Iterator[threading.Event]:
    """Cut `link`; a guard heals it after GUARD_S (the event says whether it did)."""
    stack.links.cut(link)
    healed = threading.Event()

    def heal() -> None:  # without a client-side timeout the call waits for this
        healed.set()
        stack.links.heal(link)

    guard = threading.Timer(GUARD_S, heal)
    guard.start()
    try:
        yield healed
    finally:
        guard.cancel()
        stack.links.heal(link)


def test_a_statement_through_a_cut_link_times_out_before_the_heal(stack: Stack) -> None:
    stack.up("postgres")
    link = "timeout-test->postgres"
    conn = app_pg_connect(pg_conninfo(stack.link("timeout-test", "postgres")))
    conn.timeout = 1.0
    assert isinstance(conn, TimedConnection)
    assert conn.execute("SELECT 1").fetchone() == (1,)
    with cut_with_guard(stack, link) as healed, pytest.raises(StatementTimeout) as caught:
        conn.execute("SELECT pg_sleep(0)")
    assert not healed.is_set(), "the statement waited for the heal"
    assert classify_pg(caught.value).phase == "info"  # it may have been applied
    assert conn.closed
    with app_pg_connect(pg_conninfo(stack.link("timeout-test", "postgres"))) as again:
        assert again.execute("SELECT 1").fetchone() == (1,)


def test_a_redis_call_through_a_cut_link_times_out(stack: Stack) -> None:
    stack.up("redis")
    client = redis_client(stack.link("timeout-test", "redis"), timeout=1.0)
    assert client.set("timeout-test:k", "v")
    with cut_with_guard(stack, "timeout-test->redis") as healed:
        started = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            client.set("timeout-test:k", "w")
        elapsed = time.monotonic() - started
    assert not healed.is_set(), "the call waited for the heal"
    assert elapsed < 5, f"a 1 s timeout took {elapsed:.1f} s"
    client.close()


def test_a_confirmed_publish_through_a_cut_link_fails_within_the_heartbeat_bound(
    stack: Stack,
) -> None:
    stack.up("rabbitmq")
    conn = pika.BlockingConnection(amqp_parameters(stack.link("timeout-test", "rabbitmq")))
    channel = conn.channel()
    channel.confirm_delivery()
    channel.queue_declare("timeout-test", auto_delete=True)
    channel.basic_publish("", "timeout-test", b"before")  # confirmed: the link works
    # pika checks the connection every heartbeat + 5 s and gives up after one silent
    # check interval, so two intervals bound the wait.
    bound = 2 * (AMQP_HEARTBEAT_S + 5) + 2
    with cut_with_guard(stack, "timeout-test->rabbitmq") as healed:
        started = time.monotonic()
        with pytest.raises((pika.exceptions.AMQPError, OSError)):
            channel.basic_publish("", "timeout-test", b"during")
        elapsed = time.monotonic() - started
    assert not healed.is_set(), "the publish waited for the heal"
    assert elapsed < bound, f"the publish gave up after {elapsed:.1f} s (bound {bound} s)"
    assert conn.is_closed


def test_an_offset_commit_through_a_cut_link_gives_up_and_lands_after_the_heal(
    stack: Stack,
) -> None:
    stack.up("kafka")
    direct = kafka_client_config(stack)
    topic = f"commit-timeout-{uuid.uuid4().hex[:8]}"
    create_topics(direct, [TopicSpec(topic)])
    group = f"commit-timeout-{uuid.uuid4().hex[:8]}"
    # The CDC consumers' own link and settings.
    config = kafka_client_config(
        stack, "consumer", {"group.id": group, "enable.auto.commit": False, **KAFKA_CLIENT_TIMEOUTS}
    )
    consumer = Consumer(config)
    committer = BoundedCommitter(consumer, timeout=2.0)
    assert [tp.offset for tp in committer.commit([TopicPartition(topic, 0, 1)])] == [1]
    with cut_with_guard(stack, "consumer->kafka") as healed:
        started = time.monotonic()
        with pytest.raises(CommitTimeout, match="within 2 s"):
            committer.commit([TopicPartition(topic, 0, 2)])
        elapsed = time.monotonic() - started
        # The abandoned commit is still in flight: a new one is refused at once.
        started = time.monotonic()
        with pytest.raises(CommitTimeout, match="still waiting"):
            committer.commit([TopicPartition(topic, 0, 3)])
        refused = time.monotonic() - started
        assert committer.landed() == []
    assert not healed.is_set(), "the commit waited for the heal"
    assert elapsed < 4, f"a 2 s commit deadline took {elapsed:.1f} s"
    assert refused < 0.5
    # After the heal the abandoned commit reaches Kafka, and the committer says so once.
    deadline = time.monotonic() + 30
    while not (landed := committer.landed()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [(tp.topic, tp.partition, tp.offset) for tp in landed] == [(topic, 0, 2)]
    assert committer.landed() == []
    assert [tp.offset for tp in committer.commit([TopicPartition(topic, 0, 3)])] == [3]
    consumer.close()
    auditor = Consumer({**direct, "group.id": group})
    try:
        assert [tp.offset for tp in auditor.committed([TopicPartition(topic, 0)], 10)] == [3]
    finally:
        auditor.close()


def test_the_commit_of_a_transaction_through_a_cut_link_times_out(stack: Stack) -> None:
    stack.up("postgres")
    conn = app_pg_connect(pg_conninfo(stack.link("timeout-test", "postgres")))
    conn.timeout = 1.0
    # The COMMIT is sent at the transaction block's exit, not by an execute() call.
    with contextlib.ExitStack() as cut, pytest.raises(StatementTimeout), conn.transaction():
        conn.execute("SELECT 1")  # BEGIN and the statement are answered
        healed = cut.enter_context(cut_with_guard(stack, "timeout-test->postgres"))
        started = time.monotonic()
    elapsed = time.monotonic() - started
    assert not healed.is_set(), "the COMMIT waited for the heal"
    assert elapsed < 3, f"a 1 s timeout took {elapsed:.1f} s"
    assert conn.closed


def test_the_projector_gives_up_through_a_cut_link_and_resumes_from_its_checkpoint(
    stack: Stack, tmp_path: Path
) -> None:
    stack.up("postgres")
    ctx = make_context(stack, tmp_path, "projector-timeout")
    setup = EventSourced()
    setup.prepare(ctx)

    def append(seq: int, delta: int) -> None:
        with psycopg.connect(setup.pg_direct, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (aggregate, seq, delta, event_id) VALUES ('a', %s, %s, %s)"
                ).format(setup.events),
                (seq, delta, f"e{seq}"),
            )

    def folded() -> tuple[int | None, int | None]:
        with psycopg.connect(setup.pg_direct, autocommit=True) as conn:
            balance = conn.execute(
                sql.SQL("SELECT balance FROM {} WHERE aggregate = 'a'").format(
                    sql.Identifier(ctx.namespace, "projection_balance")
                )
            ).fetchone()
            checkpoint = conn.execute(
                sql.SQL("SELECT pos FROM {}").format(sql.Identifier(ctx.namespace, "checkpoints"))
            ).fetchone()
        return (balance and balance[0]), (checkpoint and checkpoint[0])

    for seq, delta in enumerate([5, -2, 4], 1):
        append(seq, delta)
    cfg = setup._worker_config | {
        "table": "projection_balance",
        "store": LIVE,
        "name": PROJECTOR,
        "instance": "projector-i1",
        "run_dir": str(ctx.work_dir),
        "status_path": str(tmp_path / "projector.status.json"),
    }
    projector = Projector(cfg)
    projector.conn.timeout = 1.0
    with cut_with_guard(stack, "projector->postgres") as healed:
        started = time.monotonic()
        with pytest.raises(StatementTimeout):
            projector.step()
        elapsed = time.monotonic() - started
    assert not healed.is_set(), "the projector waited for the heal"
    assert elapsed < 3, f"a 1 s timeout took {elapsed:.1f} s"
    # The loop survives a cut that outlasts its timeouts, and folds every event once.
    loop = threading.Thread(target=projector.run, daemon=True)
    loop.start()
    try:
        with cut_with_guard(stack, "projector->postgres"):
            append(4, 10)
            time.sleep(PG_STATEMENT_TIMEOUT_S + 2)
            assert folded()[1] != 4, "the cut did not hold the projector"
        deadline = time.monotonic() + 30
        while folded() != (17, 4) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert folded() == (17, 4)
        assert loop.is_alive()
    finally:
        projector.stopping = True
        loop.join(timeout=15)
    setup.teardown()


def test_a_consumer_s_commit_through_a_cut_link_fails_and_is_recorded_once_it_lands(
    stack: Stack, tmp_path: Path
) -> None:
    stack.up("kafka")
    topic = f"consumer-commit-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_client_config(stack), [TopicSpec(topic)])
    ctx = make_context(stack, tmp_path, "consumer-commit")  # the run's header
    cfg = ConsumerConfig(
        instance="consumer-0#1",
        group=topic,
        topic=topic,
        partitions=[0],
        kafka=kafka_client_config(stack, "consumer"),
        redis_host="127.0.0.1",
        redis_port=1,  # not called: only commits are
        redis_password="",
        prefix="",
        store="cache",
        run_dir=str(ctx.work_dir),
        status_path=str(tmp_path / "consumer.status.json"),
        commit=BEFORE_APPLY,
    )
    consumer = CdcConsumer(cfg)
    consumer.committer.timeout = 2.0
    consumer.assign()
    assert consumer.commit_positions({0: 1})
    with cut_with_guard(stack, "consumer->kafka") as healed:
        started = time.monotonic()
        # False is what makes a before-apply consumer seek back instead of applying.
        assert not consumer.commit_positions({0: 2})
        elapsed = time.monotonic() - started
    assert not healed.is_set(), "the commit waited for the heal"
    assert elapsed < 4, f"a 2 s commit deadline took {elapsed:.1f} s"
    assert consumer.committed == {0: 1}
    deadline = time.monotonic() + 30
    while consumer.committed == {0: 1} and time.monotonic() < deadline:
        consumer.record_commits(consumer.committer.landed())
        time.sleep(0.2)
    assert consumer.committed == {0: 2}, "the abandoned commit did not land after the heal"
    consumer.rec.close()
    consumer.kafka.close()
    recorded = [e["offset"] for e in events(ctx) if e.get("action") == "commit"]
    ctx.recorder.close()  # type: ignore[attr-defined]
    assert recorded == [1, 2]
