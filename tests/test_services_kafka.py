"""Kafka (KRaft) as supervised JVMs: round trip, crash durability, topic configs, 3 nodes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.kafka import (
    KafkaCluster,
    KafkaSettings,
    kafka_client_config,
    new_cluster_id,
)
from driftlab.harness.lab.services.kafka_admin import (
    KafkaConfig,
    TopicSpec,
    admin_client,
    create_topics,
    topic_configs,
)
from driftlab.harness.lab.services.supervised import ServiceSpec


def test_topic_spec_names_kafka_configs() -> None:
    spec = TopicSpec(
        "t",
        retention_ms=1000,
        retention_bytes=4096,
        segment_ms=100,
        segment_bytes=1024,
        compact=True,
        min_insync_replicas=2,
    )
    assert spec.configs() == {
        "retention.ms": "1000",
        "retention.bytes": "4096",
        "segment.ms": "100",
        "segment.bytes": "1024",
        "min.insync.replicas": "2",
        "cleanup.policy": "compact",
    }
    assert TopicSpec("plain").configs() == {}


def test_cluster_ids_look_like_kafka_uuids() -> None:
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)


def test_unsupported_node_count_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServiceError, match="use 1"):
        KafkaCluster(ServiceSpec("kafka", tmp_path), KafkaSettings(nodes=2))


def test_a_folder_formatted_without_the_lab_s_kafka_user_is_named(tmp_path: Path) -> None:
    # A stack folder an older driftlab formatted has no SCRAM user: Kafka would start
    # and refuse every client, so the start stops here with the fix instead.
    node = KafkaCluster(ServiceSpec("kafka", tmp_path)).nodes[0]
    node.storage_dir.mkdir(parents=True)
    (node.storage_dir / "meta.properties").write_text("version=1\n")
    with pytest.raises(ServiceError, match=r"without the lab.s Kafka user.*driftlab down"):
        node.prepare()


def produce_acked(kafka: KafkaConfig, topic: str, values: list[str]) -> dict[str, tuple[int, int]]:
    """Produce with acks=all; returns value -> (partition, offset) of every acknowledged one."""
    producer = Producer({**kafka, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    acked: dict[str, tuple[int, int]] = {}

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), key=str(i).encode(), on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0, "messages still in flight after 30 s"
    return acked


def consume_all(
    kafka: KafkaConfig, topic: str, expected: int, timeout: float = 30.0
) -> list[tuple]:
    """Read a topic from the beginning; (value, partition, offset) rows."""
    consumer = Consumer(
        {
            **kafka,
            "group.id": f"test-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    rows: list[tuple] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(rows) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            rows.append((msg.value().decode(), msg.partition(), msg.offset()))
    finally:
        consumer.close()
    return rows


@pytest.fixture(scope="module")
def kafka(stack: object) -> Iterator[KafkaCluster]:
    begun = time.monotonic()
    stack.up("kafka")  # type: ignore[attr-defined]
    print(f"\nkafka: stack.up took {time.monotonic() - begun:.1f}s (0 if already running)")
    cluster = stack["kafka"]  # type: ignore[index]
    assert isinstance(cluster, KafkaCluster)
    yield cluster


@pytest.mark.services
def test_round_trip_with_acks_all(kafka: KafkaCluster) -> None:
    bootstrap = kafka.client_config()
    create_topics(bootstrap, [TopicSpec("round-trip", partitions=3)])
    values = [f"v{i}" for i in range(300)]
    acked = produce_acked(bootstrap, "round-trip", values)
    assert set(acked) == set(values)
    rows = consume_all(bootstrap, "round-trip", len(values))
    assert {(v, p, o) for v, p, o in rows} == {(v, *acked[v]) for v in values}
    # Per partition, the log order is the send order (one producer, idempotent).
    for partition in range(3):
        sent = [v for v in values if acked[v][0] == partition]
        read = [v for v, p, _ in sorted(rows, key=lambda r: r[2]) if p == partition]
        assert read == sent


@pytest.mark.services
def test_a_linked_client_stays_on_its_link(kafka: KafkaCluster, stack: Any) -> None:
    address = kafka.link(stack.links, "test-client")
    assert kafka.link(stack.links, "test-client") == address  # idempotent
    bootstrap = kafka_client_config(stack, "test-client")
    assert bootstrap["bootstrap.servers"] == address
    proxy_port = int(address.rsplit(":", 1)[1])
    # The metadata answer names the link's port, so every later request uses it too.
    brokers = admin_client(bootstrap).list_topics(timeout=10).brokers
    assert [b.port for b in brokers.values()] == [proxy_port]
    create_topics(kafka.client_config(), [TopicSpec("via-link")])
    acked = produce_acked(bootstrap, "via-link", ["through-the-proxy"])
    assert consume_all(bootstrap, "via-link", 1) == [
        ("through-the-proxy", *acked["through-the-proxy"])
    ]


@pytest.mark.services
def test_acknowledged_messages_survive_kill_9(kafka: KafkaCluster) -> None:
    """acks=all on one node means "in the leader's page cache", not "on disk".

    Kafka does not fsync before acknowledging (log.flush.interval.messages is unlimited
    by default), so this test shows durability across a process crash: SIGKILL loses
    the JVM, not the kernel's page cache. A power loss could still lose acknowledged
    messages on a single node; only replication covers that.
    """
    bootstrap = kafka.client_config()
    create_topics(bootstrap, [TopicSpec("crash", partitions=2)])
    values = [f"c{i}" for i in range(500)]
    acked = produce_acked(bootstrap, "crash", values)
    assert len(acked) == len(values)

    kafka.kill()
    assert not kafka.is_running()
    begun = time.monotonic()
    kafka.start()
    kafka.wait_healthy(120)
    print(f"\nkafka: healthy again {time.monotonic() - begun:.1f}s after kill -9 (warm)")

    rows = consume_all(bootstrap, "crash", len(values))
    assert {(v, p, o) for v, p, o in rows} == {(v, *acked[v]) for v in values}


@pytest.mark.services
def test_topic_configs_are_applied_and_retention_deletes(kafka: KafkaCluster) -> None:
    bootstrap = kafka.client_config()
    create_topics(
        bootstrap,
        [
            TopicSpec("short-lived", retention_ms=1500, segment_ms=200),
            TopicSpec("latest-only", compact=True, segment_bytes=4096, min_insync_replicas=1),
        ],
    )
    configs = topic_configs(bootstrap, "latest-only")
    assert configs["cleanup.policy"] == "compact"
    assert configs["segment.bytes"] == "4096"
    assert topic_configs(bootstrap, "short-lived")["retention.ms"] == "1500"
    # Creating the same topic again is accepted (a restarted stack keeps its topics).
    create_topics(bootstrap, [TopicSpec("short-lived", retention_ms=1500, segment_ms=200)])

    produce_acked(bootstrap, "short-lived", ["old-1", "old-2"])
    time.sleep(0.5)  # past segment.ms: the next append rolls a new segment
    produce_acked(bootstrap, "short-lived", ["new"])
    consumer = Consumer({**bootstrap, "group.id": f"wm-{uuid.uuid4()}"})
    try:
        deadline = time.monotonic() + 30
        low = 0
        while time.monotonic() < deadline:
            low, high = consumer.get_watermark_offsets(TopicPartition("short-lived", 0), 5)
            if low >= 2:
                break
            time.sleep(0.5)
    finally:
        consumer.close()
    # The closed segment (old-1, old-2) expired; the log now starts after it.
    assert low >= 2 and high == 3


@pytest.mark.services
@pytest.mark.slow
def test_three_node_cluster_replicates(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("kafka3")
    cluster = KafkaCluster(ServiceSpec("kafka", root, die_with_parent=True), KafkaSettings(3))
    begun = time.monotonic()
    try:
        cluster.start()
        cluster.wait_healthy(180)
        print(f"\nkafka x3: healthy in {time.monotonic() - begun:.1f}s (cold)")
        assert len(cluster.bootstrap_servers.split(",")) == 3
        bootstrap = cluster.client_config()
        create_topics(
            bootstrap,
            [TopicSpec("replicated", partitions=3, replication_factor=3, min_insync_replicas=2)],
        )
        values = [f"r{i}" for i in range(100)]
        acked = produce_acked(bootstrap, "replicated", values)
        assert len(acked) == len(values)
        rows = consume_all(bootstrap, "replicated", len(values), timeout=60)
        assert {v for v, _, _ in rows} == set(values)
    finally:
        cluster.stop()
    assert not cluster.is_running()
