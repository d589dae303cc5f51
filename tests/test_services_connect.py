"""Kafka Connect + Debezium PostgreSQL: change events with their LSN, crash and resume."""

from __future__ import annotations

import http.client
import json
import os
import ssl
import stat
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition

from driftlab.harness.lab.services.base import Endpoint, ServiceError
from driftlab.harness.lab.services.connect import ConnectService, RestError, is_secret
from driftlab.harness.lab.services.debezium import DebeziumPostgres, wait_slot_streaming
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.kafka_admin import list_topic_names
from driftlab.harness.lab.services.postgres import PostgresService

TABLE = "public.cdc_items"


def test_connector_config_is_validated() -> None:
    pg = Endpoint("127.0.0.1", 5432, {"user": "u", "password": "p", "dbname": "d"})
    good = DebeziumPostgres("orders-cdc", pg, "lab", ("public.orders",), heartbeat_interval_ms=500)
    config = good.config()
    assert config["plugin.name"] == "pgoutput"
    assert config["slot.name"] == "dbz_orders_cdc"
    assert config["publication.name"] == "dbz_orders_cdc_pub"
    assert config["publication.autocreate.mode"] == "filtered"
    assert config["heartbeat.interval.ms"] == "500"
    assert good.topic("public.orders") == "lab.public.orders"
    with pytest.raises(ServiceError, match="schema-qualified"):
        DebeziumPostgres("x", pg, "lab", ("orders",))
    with pytest.raises(ServiceError, match="snapshot_mode"):
        DebeziumPostgres("x", pg, "lab", ("public.orders",), snapshot_mode="sometimes")
    with pytest.raises(ServiceError, match="lower-case"):
        DebeziumPostgres("x", pg, "lab", ("public.orders",), slot_name="Bad-Slot")
    with pytest.raises(ServiceError, match="lacks"):
        DebeziumPostgres("x", Endpoint("127.0.0.1", 1), "lab", ("public.orders",))


READ_BACK = """
import java.io.FileInputStream;
import java.util.Properties;
public class ReadBack {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) { p.load(in); }
        for (String k : new java.util.TreeSet<>(p.stringPropertyNames()))
            System.out.print(k + "\\u0000" + p.getProperty(k) + "\\u0000");
    }
}
"""


def test_a_users_connector_config_reads_back_as_written(tmp_path: Any) -> None:
    # A pipeline file's connector configs hold regexes, Connect's ${...} and any text:
    # the .properties file a restarted worker reads must give back the same strings.
    from driftlab.harness.lab.services.jvm import write_properties

    config = {
        "transforms.route.regex": "([^.]+)\\.([^.]+)",
        "collection.name.format": "${topic}_copy",
        "database.password": "${file:/x/secrets.properties:database.password}",
        "odd key=with:separators": " leading space, # and ! and é",
        "multi": "line\nbreak\ttab",
    }
    write_properties(tmp_path / "c.properties", config)
    (tmp_path / "ReadBack.java").write_text(READ_BACK)
    out = subprocess.run(
        ["java", str(tmp_path / "ReadBack.java"), str(tmp_path / "c.properties")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    parts = out.split("\0")[:-1]
    assert dict(zip(parts[::2], parts[1::2], strict=True)) == config
    # Passwords are sealed by key, unless already a reference.
    assert is_secret("connection.password", "pw") and is_secret("password", "pw")
    assert not is_secret("database.password", "${file:/x:y}")
    assert not is_secret("password.encoder", "pw")


@dataclass
class Cdc:
    """The module's running pieces: PostgreSQL, the worker, the connector, a reader."""

    pg: PostgresService
    connect: ConnectService
    connector: DebeziumPostgres
    kafka: dict[str, Any]  # the lab's client config, direct

    def execute(self, sql: str, params: tuple = ()) -> Any:
        with psycopg.connect(self.pg.conninfo(), autocommit=True) as conn:
            return (
                conn.execute(sql, params).fetchall()
                if sql.lstrip().startswith("SELECT")
                else conn.execute(sql, params)
            )

    def reader(self) -> Consumer:
        """A consumer on the table's topic from the beginning (no group coordination)."""
        consumer = Consumer(
            {
                **self.kafka,
                "group.id": f"cdc-test-{uuid.uuid4()}",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(self.connector.topic(TABLE), 0, 0)])
        return consumer


def read_events(consumer: Consumer, until: Any, timeout: float = 60.0) -> list[dict]:
    """Poll change events (tombstones skipped) until `until(events)` or the deadline."""
    events: list[dict] = []
    deadline = time.monotonic() + timeout
    while not until(events) and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None or msg.error() or msg.value() is None:
            continue
        event = json.loads(msg.value())
        event["_arrived"] = time.monotonic()
        events.append(event)
    return events


@pytest.fixture(scope="module")
def cdc(stack: Any) -> Iterator[Cdc]:
    stack.up("postgres", "kafka")
    pg = stack["postgres"]
    with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id int PRIMARY KEY, v text)")
        conn.execute(f"INSERT INTO {TABLE} VALUES (0, 'before-connect') ON CONFLICT DO NOTHING")
    begun = time.monotonic()
    stack.up("connect")
    print(f"\nconnect: worker healthy in {time.monotonic() - begun:.1f}s (cold)")
    connect = stack["connect"]
    # Connect reaches PostgreSQL through its Toxiproxy link, as in experiments.
    connector = DebeziumPostgres(
        "items-cdc", stack.link("connect", "postgres"), "lab", (TABLE,), heartbeat_interval_ms=1000
    )
    begun = time.monotonic()
    connect.put_connector(connector)
    wait_slot_streaming(connector)
    print(f"connect: connector streaming {time.monotonic() - begun:.1f}s after registration")
    yield Cdc(pg, connect, connector, kafka_client_config(stack))


@pytest.mark.services
def test_snapshot_then_insert_arrives_with_its_lsn(cdc: Cdc) -> None:
    consumer = cdc.reader()
    try:
        snapshot = read_events(consumer, lambda ev: any(e["after"]["id"] == 0 for e in ev))
        assert [e["op"] for e in snapshot if e["after"]["id"] == 0] == ["r"]

        with psycopg.connect(cdc.pg.conninfo()) as conn:
            lsn_before = conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()[0]
            txid = conn.execute("SELECT txid_current()").fetchone()[0]
            conn.execute(f"INSERT INTO {TABLE} VALUES (1, 'live')")
        committed = time.monotonic()  # the block's exit committed
        lsn_after = cdc.execute("SELECT pg_current_wal_lsn() - '0/0'")[0][0]

        events = read_events(consumer, lambda ev: any(e["after"]["id"] == 1 for e in ev))
    finally:
        consumer.close()
    [event] = [e for e in events if e["after"]["id"] == 1]
    print(f"\ncdc: insert committed -> event consumed in {event['_arrived'] - committed:.3f}s")
    assert event["op"] == "c"
    assert event["before"] is None
    assert event["after"] == {"id": 1, "v": "live"}
    source = event["source"]
    assert source["table"] == "cdc_items" and source["schema"] == "public"
    assert source["txId"] == txid
    # The change record starts at or after the insert position seen before it.
    assert lsn_before <= source["lsn"] < lsn_after


@pytest.mark.services
def test_kill_9_connect_resumes_from_stored_offset(cdc: Cdc) -> None:
    """Nothing committed is lost across a Connect crash; re-sent events are counted.

    Offsets (the LSN Debezium confirmed) are flushed every offset.flush.interval.ms, so
    rows streamed since the last flush are read again from the slot after the restart.
    """
    ids = range(100, 400)
    writer_done = threading.Event()

    def insert(rows: range, pause: float = 0.0) -> None:
        with psycopg.connect(cdc.pg.conninfo(), autocommit=True) as conn:
            for i in rows:
                conn.execute(f"INSERT INTO {TABLE} VALUES (%s, 'crash')", (i,))
                time.sleep(pause)

    def writer() -> None:
        insert(range(100, 250), pause=0.01)
        writer_done.set()

    # Without any stored offset a restarted connector snapshots again; wait for the
    # worker's first flush so that this test is about resuming.
    offsets = cdc.connect.offsets_path
    deadline = time.monotonic() + 30
    while not (offsets.exists() and offsets.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert offsets.stat().st_size > 0, "Connect never flushed its offsets"
    # That first flush may still hold the snapshot's offsets, after which a restart
    # snapshots again; the kill below waits for a flush made while streaming.
    snapshot_offsets = offsets.read_bytes()

    thread = threading.Thread(target=writer)
    thread.start()
    # Kill once some of these rows are in Kafka, so events sent after the last offset
    # flush exist, while the rest are still being committed.
    consumer = cdc.reader()
    try:
        read_events(consumer, lambda ev: sum(1 for e in ev if e["after"]["id"] >= 100) >= 20)
    finally:
        consumer.close()
    deadline = time.monotonic() + 60
    while offsets.read_bytes() == snapshot_offsets and time.monotonic() < deadline:
        time.sleep(0.2)
    assert offsets.read_bytes() != snapshot_offsets, "Connect never flushed a streaming offset"
    cdc.connect.kill()
    assert not cdc.connect.is_running()
    thread.join()
    assert writer_done.is_set()
    insert(range(250, 400))  # committed while Connect is down

    begun = time.monotonic()
    cdc.connect.start()
    cdc.connect.wait_healthy(120)
    wait_slot_streaming(cdc.connector)
    print(f"\nconnect: streaming again {time.monotonic() - begun:.1f}s after kill -9 (warm)")

    consumer = cdc.reader()
    try:
        wanted = set(ids)
        events = read_events(
            consumer, lambda ev: wanted <= {e["after"]["id"] for e in ev if e["after"]}, 90
        )
    finally:
        consumer.close()
    seen = Counter(e["after"]["id"] for e in events if e["after"] and e["after"]["id"] in wanted)
    lost = sorted(wanted - set(seen))
    duplicated = {i: n for i, n in seen.items() if n > 1}
    print(f"cdc: after kill -9 of Connect: {len(lost)} lost, {len(duplicated)} duplicated rows")
    if duplicated:
        print(f"cdc: duplicated ids (id: copies): {dict(sorted(duplicated.items()))}")
    assert lost == []
    # It resumed from its stored offset: the initial snapshot was not taken again.
    assert [e["op"] for e in events if e["after"] and e["after"]["id"] == 0] == ["r"]
    # Re-sent events are the same change: same LSN and transaction as the first copy.
    by_id: dict[int, set] = {}
    for e in events:
        if e["after"] and e["after"]["id"] in duplicated:
            by_id.setdefault(e["after"]["id"], set()).add((e["source"]["lsn"], e["source"]["txId"]))
    assert all(len(v) == 1 for v in by_id.values())


@pytest.mark.services
def test_replacing_the_connector_config(cdc: Cdc) -> None:
    changed = replace(cdc.connector, heartbeat_interval_ms=2000)
    cdc.connect.put_connector(changed)
    live = cdc.connect.rest("GET", f"/connectors/{changed.name}/config")
    assert live["heartbeat.interval.ms"] == "2000"
    saved = (cdc.connect.connectors_dir / f"{changed.name}.properties").read_text()
    assert "heartbeat.interval.ms=2000" in saved
    assert cdc.connector.heartbeat_topic in list_topic_names(cdc.kafka)


@pytest.mark.services
def test_rejected_connector_config_is_not_kept(cdc: Cdc) -> None:
    pg = cdc.pg.endpoint()
    wrong = Endpoint(pg.host, pg.port, {**pg.extra, "password": "not-the-password"})
    bad = DebeziumPostgres("bad-login", wrong, "bad", (TABLE,))
    # Connect validates before accepting: Debezium tries the login and reports why.
    with pytest.raises(RestError, match="password authentication failed") as failure:
        cdc.connect.put_connector(bad, timeout=60)
    assert failure.value.status == 400
    assert "bad-login" not in cdc.connect.registered()
    assert cdc.connect.registered() == [cdc.connector.name]
    cdc.connect.delete_connector(bad.name)  # unknown to the worker: not an error


@pytest.mark.services
def test_connect_reaches_kafka_only_through_its_link(cdc: Cdc, stack: Any) -> None:
    assert "connect->kafka" in {link.name for link in stack.links.list()}
    assert cdc.connect.kafka_bootstrap != cdc.kafka["bootstrap.servers"]
    consumer = cdc.reader()
    try:
        stack.links.disable("connect->kafka")
        try:
            cdc.execute(f"INSERT INTO {TABLE} VALUES (500, 'during-partition')")
            held = read_events(consumer, lambda ev: any(e["after"]["id"] == 500 for e in ev), 4)
            assert not any(e["after"]["id"] == 500 for e in held), "the event bypassed the link"
        finally:
            stack.links.heal("connect->kafka")
        healed = time.monotonic()
        events = read_events(consumer, lambda ev: any(e["after"]["id"] == 500 for e in ev), 90)
    finally:
        consumer.close()
    arrived = [e for e in events if e["after"]["id"] == 500]
    assert arrived, "the event never arrived after the link healed"
    print(f"\ncdc: event arrived {arrived[0]['_arrived'] - healed:.1f}s after the link healed")


@pytest.mark.services
def test_no_connector_config_hands_out_the_database_password(cdc: Cdc, stack: Any) -> None:
    password = cdc.connector.config()["database.password"]
    assert password
    shown = json.dumps(cdc.connect.rest("GET", "/connectors?expand=info"))
    assert "items-cdc" in shown and "${file:" in shown
    assert password not in shown
    files = [*cdc.connect.connectors_dir.glob("*.properties")]
    assert files and not any(password in f.read_text() for f in files)
    secrets = cdc.connect.secrets_dir / "items-cdc.properties"
    assert password in secrets.read_text()  # where the worker resolves it from
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert stat.S_IMODE(cdc.connect.secrets_dir.stat().st_mode) == 0o700
    if os.geteuid() == 0:  # another local account cannot read it
        done = subprocess.run(
            ["su", "nobody", "-s", "/bin/sh", "-c", f"cat {secrets}"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode != 0 and password not in done.stdout
    # Nor does the worker's own file hold Kafka's password: a reference to the login file.
    kafka_password = kafka_client_config(stack)["sasl.password"]
    worker = cdc.connect.worker_path.read_text()
    assert "sasl.jaas.config=${file:" in worker and kafka_password not in worker
    assert stat.S_IMODE(cdc.connect.worker_path.stat().st_mode) == 0o600
    # The worker resolved the reference: the connector streams (the fixture waited).
    assert cdc.connect.status("items-cdc")["connector"]["state"] == "RUNNING"


@pytest.mark.services
def test_the_rest_api_refuses_a_client_without_the_stacks_certificate(cdc: Cdc) -> None:
    url = f"{cdc.connect.rest_url}/connectors?expand=info"
    assert url.startswith("https://127.0.0.1:")
    assert cdc.connect.rest("GET", "/connectors") == ["items-cdc"]  # the stack's client
    stranger = ssl.create_default_context(cafile=str(cdc.connect.tls.ca))  # no certificate
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        _read(url, stranger)
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        _read(url.replace("https", "http"), None)
    tls = cdc.connect.tls.folder
    assert stat.S_IMODE(tls.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in tls.iterdir())


def _read(url: str, context: ssl.SSLContext | None) -> bytes:
    with urllib.request.urlopen(url, timeout=10, context=context) as answer:
        return answer.read()
