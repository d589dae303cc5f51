"""The Kafka and HTTP readers of a pipeline's stores, on a real broker and a real HTTP
server: a topic read to its end as a mirror (the latest record per key, a tombstone
removes the key, compacted or not) and as a log (every record), incrementally; JSON
fields found by dotted paths; an HTTP answer as an object or as a list."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from confluent_kafka import Producer

from driftlab.harness.lab.services.kafka_admin import TopicSpec, create_topics, delete_topics
from driftlab.scenarios.pipeline.http_reader import HttpReader
from driftlab.scenarios.pipeline.kafka_reader import KafkaReader
from driftlab.scenarios.pipeline.spec_sections import FieldPaths


@pytest.fixture(scope="module")
def kafka(stack: object) -> object:
    stack.up("kafka")  # type: ignore[attr-defined]
    return stack["kafka"]  # type: ignore[index]


def send(login: dict, topic: str, records: list[tuple[bytes | None, bytes | None, int]]) -> None:
    producer = Producer({**login, "acks": "all"})
    for key, value, partition in records:
        producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(30) == 0


def envelope(value: str | None, version: int) -> bytes:
    after = None if value is None else {"value": value, "version": version}
    return json.dumps({"payload": {"after": after, "op": "u"}}).encode()


@pytest.mark.services
@pytest.mark.parametrize("compact", [False, True])
def test_a_topic_read_to_its_end_as_mirror_and_log(kafka: object, compact: bool) -> None:
    bootstrap = kafka.client_config()  # type: ignore[attr-defined]
    topic = f"readers-{'compact' if compact else 'plain'}"
    delete_topics(bootstrap, [topic])
    create_topics(bootstrap, [TopicSpec(topic, partitions=2, compact=compact)])
    paths = FieldPaths(key="key", value="payload.after.value", version="payload.after.version")
    reader = KafkaReader(kafka.client_config(), topic, paths)  # type: ignore[attr-defined]
    try:
        assert reader.read_all() == {}
        records = [
            (b'{"key": "k1"}', envelope("a", 1), 0),
            (b'{"key": "k2"}', envelope("b", 1), 1),
            (b'{"key": "k1"}', envelope("c", 2), 0),
            (b'{"key": "k3"}', b"not json", 1),
        ]
        if not compact:  # a compacted topic refuses a record without a key
            records.append((None, envelope("x", 9), 0))  # not a store's record
        send(bootstrap, topic, records)
        assert reader.read_all() == {"k1": ("c", 2), "k2": ("b", 1)}
        assert reader.undecodable == (1 if compact else 2)
        # Read on from where it stopped: a delete (after null), a tombstone, a new key.
        send(
            bootstrap,
            topic,
            [
                (b'{"key": "k1"}', envelope(None, 3), 0),
                (b'{"key": "k2"}', None, 1),
                (b'{"key": "k4"}', envelope("d", 1), 0),
            ],
        )
        assert reader.read_all() == {"k4": ("d", 1)}
        assert reader.rows() == Counter(
            {("k1", "a"): 1, ("k2", "b"): 1, ("k1", "c"): 1, ("k4", "d"): 1}
        )
        # A second reader from the beginning sees the same.
        fresh = KafkaReader(kafka.client_config(), topic, paths)  # type: ignore[attr-defined]
        try:
            assert fresh.read_all() == {"k4": ("d", 1)}
        finally:
            fresh.close()
    finally:
        reader.close()
        delete_topics(bootstrap, [topic])


@pytest.mark.services
def test_a_topic_not_made_yet_holds_nothing(kafka: object) -> None:
    reader = KafkaReader(kafka.client_config(), "readers-never-made", FieldPaths())  # type: ignore[attr-defined]
    try:
        assert reader.read_all() == {} and reader.rows() == Counter()
    finally:
        reader.close()


@pytest.fixture
def serving() -> Iterator[tuple[str, list[object]]]:
    answers: list[object] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(answers[0]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/items", answers
    finally:
        server.shutdown()


def test_an_http_answer_as_an_object_or_a_list(serving: tuple[str, list[object]]) -> None:
    url, answers = serving
    answers[:] = [{"k1": "a", "k2": None, "k3": 5}]
    assert HttpReader(url, FieldPaths()).read_all() == {"k1": ("a", None), "k3": ("5", None)}
    answers[:] = [{"k1": {"value": "a", "version": "4"}, "k2": {"value": None}}]
    nested = HttpReader(url, FieldPaths(value="value", version="version"))
    assert nested.read_all() == {"k1": ("a", 4)}
    answers[:] = [
        [
            {"id": "k1", "data": {"v": "a"}, "n": 1},
            {"id": "k1", "data": {"v": "b"}, "n": 2},
            {"id": "k2", "data": {"v": "c"}, "n": 1},
        ]
    ]
    listed = HttpReader(url, FieldPaths(key="id", value="data.v", version="n"))
    assert listed.read_all() == {"k1": ("b", 2), "k2": ("c", 1)}
    assert listed.rows() == Counter({("k1", "a"): 1, ("k1", "b"): 1, ("k2", "c"): 1})
    answers[:] = ["not an object"]
    with pytest.raises(ValueError, match="not an object or a list"):
        listed.read_all()
