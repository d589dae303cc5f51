"""Figures for the CDC path: PostgreSQL commit -> Debezium -> Kafka -> consumer.

    .venv/bin/python benchmarks/cdc_latency_bench.py [--rows 200] [--pause 0.02]

Starts an owned stack (postgres, kafka, connect) in a fresh folder, prints how long each
piece took to become healthy (cold), how long the connector took to stream, then the
end-to-end latency of single-row inserts (commit returned -> event consumed) and of a
Kafka acks=all produce. Prints figures only; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, Producer, TopicPartition

from driftlab.harness.lab.services.connect import DebeziumPostgres, wait_slot_streaming
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.kafka_admin import KafkaConfig, TopicSpec, create_topics
from driftlab.harness.lab.services.stack import Stack

TABLE = "public.bench_rows"


def _figures(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    q = statistics.quantiles(ms, n=100) if len(ms) > 1 else ms * 99
    return (
        f"{name}: n={len(ms)} p50 {q[49]:.1f} ms, p90 {q[89]:.1f} ms, "
        f"p99 {q[98]:.1f} ms, max {ms[-1]:.1f} ms"
    )


def _cdc_latencies(stack: Stack, connector: DebeziumPostgres, rows: int, pause: float) -> list:
    consumer = Consumer(kafka_client_config(stack, settings={"group.id": "bench"}))
    consumer.assign([TopicPartition(connector.topic(TABLE), 0, 0)])
    committed: dict[int, float] = {}
    arrived: dict[int, float] = {}

    def write() -> None:
        with psycopg.connect(stack["postgres"].conninfo(), autocommit=True) as conn:
            for i in range(1, rows + 1):
                conn.execute(f"INSERT INTO {TABLE} VALUES (%s)", (i,))
                committed[i] = time.monotonic()
                time.sleep(pause)

    writer = threading.Thread(target=write)
    writer.start()
    deadline = time.monotonic() + 120
    while len(arrived) < rows and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is None or msg.error() or msg.value() is None:
            continue
        row_id = json.loads(msg.value())["after"]["id"]
        if row_id > 0:
            arrived.setdefault(row_id, time.monotonic())
    writer.join()
    consumer.close()
    return [arrived[i] - committed[i] for i in arrived if i in committed]


def _produce_latencies(kafka: KafkaConfig, count: int) -> list[float]:
    create_topics(kafka, [TopicSpec("bench-acks")])
    producer = Producer({**kafka, "acks": "all", "linger.ms": 0})
    took: list[float] = []
    for i in range(count):
        begun = time.monotonic()
        producer.produce("bench-acks", str(i).encode())
        producer.flush(10)
        took.append(time.monotonic() - begun)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200, help="inserts timed end to end")
    parser.add_argument("--pause", type=float, default=0.02, help="seconds between inserts")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="driftlab-bench-cdc-", dir="/tmp"))
    root.chmod(0o755)
    stack = Stack(root, owned=True)
    try:
        stack.up(
            "postgres",
            "kafka",
            "connect",
            progress=lambda name, event: print(f"  {name}: {event}"),
        )
        with psycopg.connect(stack["postgres"].conninfo(), autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY)")
            conn.execute(f"INSERT INTO {TABLE} VALUES (0)")
        connector = DebeziumPostgres("bench-cdc", stack.endpoint("postgres"), "bench", (TABLE,))
        begun = time.monotonic()
        stack["connect"].put_connector(connector)
        wait_slot_streaming(connector)
        print(f"connector registered -> slot streaming: {time.monotonic() - begun:.1f} s")
        print(
            _figures(
                "cdc commit -> consumed", _cdc_latencies(stack, connector, args.rows, args.pause)
            )
        )
        kafka = kafka_client_config(stack)
        print(_figures("kafka produce acks=all", _produce_latencies(kafka, 200)))
    finally:
        stack.down()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
