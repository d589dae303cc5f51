"""Keeps each order's total, the sum of its lines' amounts, in Redis from Debezium's
change events of the table `lines` (one Kafka topic, one partition).

Its Kafka position is kept in Redis, `PREFIX + "offset"`, written in the same
MULTI/EXEC as the change each record makes, so a crash of this consumer never applies a
record twice or skips one. That is not enough: Debezium itself delivers at least once.
When Kafka Connect dies before it has flushed the source's offsets (every few seconds),
the restarted connector sends again what it had sent since; when it dies before the
initial snapshot's end was flushed, it starts the snapshot over and sends every row of
the table again as a read (`op = "r"`) record.

So each change record *sets* state: the line's amount in the hash
`PREFIX + "lines:" + order` (deleted with the line), and the order's total recomputed
from that hash into `PREFIX + "total:" + order` (removed with its last line). A record
sent twice sets the same values twice. A snapshot is the whole table at one moment, so
it replaces the state whole: its read records (`source.snapshot` "first" ... "last")
are gathered, and applied with the position past the last one in one MULTI/EXEC that
also removes every order and line the snapshot does not hold (deleted while Connect was
down: no delete record will ever say so). Until then the position stays before the
snapshot's first record, so a crash while gathering reads the snapshot again.

ADD_AMOUNTS=1 plants the bug users of Debezium hit at the snapshot's handover: each
record adds its change to the total (after's amount minus before's, which REPLICA
IDENTITY FULL puts in updates and deletes) and counts lines the same way. Exact
while every record comes once; after a Connect restart during or just after the
initial snapshot, every line read again is added again, and the totals match no state
the orders ever had.

Environment: BOOTSTRAP, KAFKA_SECURITY_PROTOCOL, KAFKA_SASL_MECHANISM, KAFKA_USERNAME,
KAFKA_PASSWORD (the stack's login), TOPIC, REDIS_HOST, REDIS_PORT, REDIS_PASSWORD
(empty: none), PREFIX.
"""

from __future__ import annotations

import json
import os
import sys
import time
from decimal import Decimal
from typing import Any

import redis
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

TOPIC = os.environ["TOPIC"]
PREFIX = os.environ["PREFIX"]
ADD_AMOUNTS = os.environ.get("ADD_AMOUNTS") == "1"
OFFSET = PREFIX + "offset"

store = redis.Redis(
    host=os.environ["REDIS_HOST"],
    port=int(os.environ["REDIS_PORT"]),
    password=os.environ.get("REDIS_PASSWORD") or None,
    socket_timeout=2,
    socket_connect_timeout=2,
    decode_responses=True,
)


def kafka() -> Consumer:
    """A consumer of no group: the position is this program's, in Redis."""
    return Consumer(
        {
            "bootstrap.servers": os.environ["BOOTSTRAP"],
            "security.protocol": os.environ["KAFKA_SECURITY_PROTOCOL"],
            "sasl.mechanism": os.environ["KAFKA_SASL_MECHANISM"],
            "sasl.username": os.environ["KAFKA_USERNAME"],
            "sasl.password": os.environ["KAFKA_PASSWORD"],
            "group.id": PREFIX + "totals",  # required by the client; never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
    )


def retried(what: str, f: Any, *args: Any) -> Any:
    """f(*args), again after each Redis error until it succeeds."""
    while True:
        try:
            return f(*args)
        except redis.RedisError as e:
            print(f"{what} failed, retrying: {e}", flush=True)
            time.sleep(0.5)


def set_line(pipe: Any, order: str, line: str, amount: str | None) -> None:
    """The correct change: the line's amount set (None: removed) and the total
    recomputed from every line of the order."""
    lines_key, total_key = f"{PREFIX}lines:{order}", f"{PREFIX}total:{order}"
    lines = retried("read the order's lines", store.hgetall, lines_key)
    if amount is None:
        lines.pop(line, None)
        pipe.hdel(lines_key, line)
    else:
        lines[line] = amount
        pipe.hset(lines_key, line, amount)
    if lines:
        pipe.set(total_key, str(sum(Decimal(a) for a in lines.values())))
    else:
        pipe.delete(total_key)


def add_change(pipe: Any, order: str, before: dict | None, after: dict | None) -> None:
    """The planted bug: the change added to the running total and line count."""
    total_key, count_key = f"{PREFIX}total:{order}", f"{PREFIX}count:{order}"
    total = Decimal(retried("read the total", store.get, total_key) or "0")
    count = int(retried("read the count", store.get, count_key) or "0")
    if before:
        total, count = total - Decimal(before["amount"]), count - 1
    if after:
        total, count = total + Decimal(after["amount"]), count + 1
    if count > 0:
        pipe.set(total_key, str(total))
        pipe.set(count_key, count)
    else:
        pipe.delete(total_key, count_key)


def replace_all(pipe: Any, lines: dict[str, dict[str, str]]) -> None:
    """A snapshot's state: every order's lines and total as `lines` has them, every
    other order of the store removed."""
    for key in retried("list the orders", lambda: list(store.scan_iter(f"{PREFIX}lines:*"))):
        order = key.removeprefix(f"{PREFIX}lines:")
        if order not in lines:
            pipe.delete(key, f"{PREFIX}total:{order}")
    for order, amounts in lines.items():
        pipe.delete(f"{PREFIX}lines:{order}")
        pipe.hset(f"{PREFIX}lines:{order}", mapping=amounts)
        pipe.set(f"{PREFIX}total:{order}", str(sum(Decimal(a) for a in amounts.values())))


snapshot: dict[str, dict[str, str]] | None = None
"""The lines the snapshot being read holds so far, by order (None: none is read)."""


def apply(msg: Message) -> None:
    """One record's change and the position past it, in one MULTI/EXEC."""
    global snapshot
    pipe = store.pipeline(transaction=True)
    if msg.value() is not None:  # a tombstone changes nothing
        event = json.loads(msg.value())
        before, after = event.get("before"), event.get("after")
        row = after or before
        if ADD_AMOUNTS:
            add_change(pipe, row["order_id"], before, after)
        elif event["op"] == "r":
            marker = event["source"].get("snapshot")
            if marker == "first" or snapshot is None:
                snapshot = {}
            snapshot.setdefault(row["order_id"], {})[str(row["line"])] = row["amount"]
            if marker != "last":
                return
            replace_all(pipe, snapshot)
            snapshot = None
        else:
            amount = after["amount"] if after else None
            set_line(pipe, row["order_id"], str(row["line"]), amount)
    pipe.set(OFFSET, msg.offset() + 1)
    retried("write the change", pipe.execute)


def main() -> None:
    consumer = kafka()
    while True:  # Debezium creates the topic with its first record
        try:
            meta = consumer.list_topics(TOPIC, timeout=5)
            if not meta.topics[TOPIC].error:
                break
        except KafkaException as e:
            print(f"waiting for the topic: {e}", flush=True)
        time.sleep(0.5)
    start = int(retried("read the position", store.get, OFFSET) or 0)
    consumer.assign([TopicPartition(TOPIC, 0, start)])
    print(
        f"totals ready (topic {TOPIC} from offset {start}, add_amounts={ADD_AMOUNTS})", flush=True
    )
    while True:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() != KafkaError._PARTITION_EOF:
                print(f"kafka: {msg.error()}", flush=True)
            continue
        apply(msg)


if __name__ == "__main__":
    sys.exit(main())
