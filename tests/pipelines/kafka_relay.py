"""A user's relay from an outbox table to a Kafka topic, for the pipeline tests.

Every PostgreSQL write of the source also inserts its row into `<namespace>.pending`
(the pipeline file's `write`); this program sends the pending rows to TOPIC in their
order, each as key -> {"after": {"value": ..., "version": ...}} (Debezium's envelope),
and deletes them once Kafka has acknowledged them. It creates TOPIC (one partition).

BUG plants what the tests must catch: `drop` never sends a value ending in 7;
`resend` sends every fourth version of a key a second time, a second later, after the
key's newer versions.
"""

from __future__ import annotations

import json
import os
import sys
import time

import psycopg
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

DSN, BOOTSTRAP, TOPIC, PENDING = (os.environ[n] for n in ("DSN", "BOOTSTRAP", "TOPIC", "PENDING"))
BUG = os.environ.get("BUG", "")
KAFKA = {
    "bootstrap.servers": BOOTSTRAP,
    "security.protocol": os.environ["KAFKA_SECURITY_PROTOCOL"],
    "sasl.mechanism": os.environ["KAFKA_SASL_MECHANISM"],
    "sasl.username": os.environ["KAFKA_USERNAME"],
    "sasl.password": os.environ["KAFKA_PASSWORD"],
}


def make_topic() -> None:
    admin = AdminClient(KAFKA)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def main() -> None:
    make_topic()
    failed: list[str] = []

    def delivered(err: KafkaError | None, _: object) -> None:
        if err is not None:
            failed.append(str(err))

    producer = Producer({**KAFKA, "acks": "all"})
    later: list[tuple[float, str, str]] = []
    print("relay ready", flush=True)
    with psycopg.connect(DSN, autocommit=True) as conn:
        while True:
            rows = conn.execute(
                f"SELECT id, key, value, version FROM {PENDING} ORDER BY id LIMIT 500"
            ).fetchall()
            for _, key, value, version in rows:
                if BUG == "drop" and value.endswith("7"):
                    continue
                payload = json.dumps({"after": {"value": value, "version": version}})
                producer.produce(TOPIC, key=key, value=payload, on_delivery=delivered)
                if BUG == "resend" and version % 4 == 0:
                    later.append((time.monotonic() + 1.0, key, payload))
            due = [item for item in later if item[0] <= time.monotonic()]
            for item in due:
                later.remove(item)
                producer.produce(TOPIC, key=item[1], value=item[2])
            if producer.flush(30) or failed:
                sys.exit(f"kafka did not take every record: {failed[:1]}")
            if rows:
                conn.execute(f"DELETE FROM {PENDING} WHERE id = ANY(%s)", ([r[0] for r in rows],))
            time.sleep(0.05)


if __name__ == "__main__":
    main()
