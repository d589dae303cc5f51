"""The core services as real processes: round trips, crashes, pauses and link faults.

One session stack (tests/conftest.py) starts each service once; a test that kills or
pauses a service brings it back before it ends.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
from pathlib import Path

import nats
import pika
import psycopg
import pytest
import redis
from service_checks import check_committed_rows_survive_a_kill, pg_connect

from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.stack import Stack

pytestmark = pytest.mark.services


def _redis(endpoint: Endpoint, timeout: float = 3.0) -> redis.Redis:
    return redis.Redis(
        host=endpoint.host,
        port=endpoint.port,
        password=endpoint.extra["password"],
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )


def _uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for pid {pid}")


@pytest.fixture(scope="module")
def pg(stack: Stack) -> Endpoint:
    stack.up("postgres")
    return stack.link("test", "postgres")


@pytest.fixture(scope="module")
def cache(stack: Stack) -> Endpoint:
    stack.up("redis")
    return stack.link("test", "redis")


def test_postgres_is_ready_for_logical_decoding(stack: Stack, pg: Endpoint) -> None:
    with pg_connect(pg) as conn:
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('wal_level', 'fsync', 'max_replication_slots', 'max_wal_senders', "
                "'listen_addresses')"
            ).fetchall()
        )
        assert settings["wal_level"] == "logical"
        assert settings["fsync"] == "on"
        assert int(settings["max_replication_slots"]) >= 10
        assert int(settings["max_wal_senders"]) >= 10
        assert settings["listen_addresses"] == "127.0.0.1"
        conn.execute("SELECT pg_create_logical_replication_slot('t_slot', 'test_decoding')")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS t_decode (id int PRIMARY KEY)")
            conn.execute("INSERT INTO t_decode VALUES (1) ON CONFLICT DO NOTHING")
            changes = conn.execute(
                "SELECT data FROM pg_logical_slot_peek_changes('t_slot', NULL, NULL)"
            ).fetchall()
        finally:
            conn.execute("SELECT pg_drop_replication_slot('t_slot')")
    assert any("table public.t_decode: INSERT" in row[0] for row in changes), changes
    if os.geteuid() == 0:  # PostgreSQL refuses root: it must run unprivileged
        assert _uid_of(stack["postgres"].records()["main"].pid) != 0


def test_postgres_keeps_committed_rows_after_kill_9(stack: Stack, pg: Endpoint) -> None:
    check_committed_rows_survive_a_kill(stack["postgres"], pg)


def test_redis_keeps_appendonly_data_after_kill_9(stack: Stack, cache: Endpoint) -> None:
    _redis(cache).set("crash-key", "kept")
    service = stack["redis"]
    service.kill()
    with pytest.raises(redis.ConnectionError):
        _redis(cache, timeout=1).get("crash-key")
    service.start()
    service.wait_healthy(30)
    assert _redis(cache).get("crash-key") == b"kept"


def test_redis_requires_its_password(cache: Endpoint) -> None:
    anonymous = redis.Redis(host=cache.host, port=cache.port, socket_timeout=3)
    with pytest.raises(redis.AuthenticationError):
        anonymous.get("x")


def test_pause_stalls_a_client_until_resume(stack: Stack, cache: Endpoint) -> None:
    client = _redis(cache, timeout=10)
    client.ping()
    service = stack["redis"]
    blocked: list[float] = []

    def call() -> None:
        begun = time.monotonic()
        client.incr("pause-counter")
        blocked.append(time.monotonic() - begun)

    service.pause()
    try:
        caller = threading.Thread(target=call)
        caller.start()
        time.sleep(1.5)
        assert caller.is_alive(), "the call returned while the server was paused"
    finally:
        service.resume()
    caller.join(5)
    assert blocked, "the call did not complete after resume"
    print(f"redis call blocked by a 1.5 s pause: {blocked[0]:.2f} s")
    assert 1.4 <= blocked[0] < 5


def test_cut_makes_a_client_time_out_and_heal_lets_it_through(stack: Stack, pg: Endpoint) -> None:
    link = "test->postgres"
    stack.links.cut(link)
    try:
        begun = time.monotonic()
        with pytest.raises(psycopg.OperationalError):
            pg_connect(pg, timeout=2).close()
        waited = time.monotonic() - begun
    finally:
        stack.links.heal(link)
    print(f"connect through a cut link failed after {waited:.2f} s")
    assert waited >= 1.5  # a timeout, not a refusal
    with pg_connect(pg) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert all(info.toxics == () for info in stack.links.list() if info.name == link)


def test_latency_shows_in_round_trip_times(stack: Stack, cache: Endpoint) -> None:
    client = _redis(cache)

    def median_rtt_ms() -> float:
        samples = []
        for _ in range(7):
            begun = time.perf_counter()
            client.ping()
            samples.append((time.perf_counter() - begun) * 1000)
        return statistics.median(samples)

    base = median_rtt_ms()
    stack.links.latency("test->redis", ms=80, jitter_ms=5)
    try:
        slowed = median_rtt_ms()
    finally:
        stack.links.heal("test->redis")
    healed = median_rtt_ms()
    print(f"redis ping rtt: {base:.1f} ms, with 80 ms latency each way {slowed:.1f} ms")
    assert slowed >= 150  # 80 ms each way, minus jitter
    assert healed < slowed / 2


def test_rabbitmq_publish_and_consume(stack: Stack) -> None:
    stack.up("rabbitmq")
    link = stack.link("test", "rabbitmq")
    params = pika.ConnectionParameters(
        host=link.host,
        port=link.port,
        credentials=pika.PlainCredentials(link.extra["user"], link.extra["password"]),
        connection_attempts=1,
        socket_timeout=5,
    )
    connection = pika.BlockingConnection(params)
    try:
        channel = connection.channel()
        queue = channel.queue_declare("", exclusive=True).method.queue
        channel.basic_publish("", queue, b"hello amqp")
        deadline = time.monotonic() + 5
        body = None
        while body is None and time.monotonic() < deadline:
            _method, _props, body = channel.basic_get(queue, auto_ack=True)
    finally:
        connection.close()
    assert body == b"hello amqp"


def test_nats_jetstream_publish_and_consume(stack: Stack) -> None:
    stack.up("nats")
    link = stack.link("test", "nats")

    async def round_trip() -> list[bytes]:
        client = await nats.connect(
            f"nats://{link.host}:{link.port}",
            user=link.extra["user"],
            password=link.extra["password"],
            connect_timeout=3,
            max_reconnect_attempts=0,
        )
        try:
            js = client.jetstream()
            await js.add_stream(name="TEST_RT", subjects=["rt.>"])
            ack = await js.publish("rt.one", b"hello jetstream")
            assert ack.stream == "TEST_RT"
            sub = await js.pull_subscribe("rt.>", durable="rt-consumer")
            msgs = await sub.fetch(1, timeout=5)
            for msg in msgs:
                await msg.ack()
            await js.delete_stream("TEST_RT")
            return [m.data for m in msgs]
        finally:
            await client.close()

    assert asyncio.run(round_trip()) == [b"hello jetstream"]


def test_every_service_listens_on_loopback_only(stack: Stack) -> None:
    stack.up("postgres", "redis", "nats", "rabbitmq")
    listening = Path("/proc/net/tcp").read_text().splitlines()[1:]
    local = [line.split()[1] for line in listening if line.split()[3] == "0A"]  # LISTEN
    for name in ("postgres", "redis", "nats", "rabbitmq", "toxiproxy"):
        # Every port of the service: RabbitMQ's Erlang distribution and epmd included.
        for role, port in stack[name].spec.ports.items():
            bound = [addr for addr in local if int(addr.split(":")[1], 16) == port]
            assert bound, f"{name} is not listening on its {role} port {port}"
            assert all(addr.split(":")[0] == "0100007F" for addr in bound), (name, role, bound)
