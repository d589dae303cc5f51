"""A locked-down lab: PostgreSQL and Kafka accept no local user without the stack's
password, Toxiproxy's API is the stack user's alone, and nothing of an analysis listens
beyond loopback."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from driftlab.harness.lab.services import jvm
from driftlab.harness.lab.services.binaries import POSTGRES_BIN
from driftlab.harness.lab.services.kafka import KafkaCluster, KafkaSettings, kafka_client_config
from driftlab.harness.lab.services.kafka_admin import TopicSpec, create_topics
from driftlab.harness.lab.services.postgres import PostgresService
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.services.stack_state import STATE_FILE
from driftlab.harness.lab.services.supervised import ServiceSpec
from driftlab.harness.lab.services.toxiproxy import ToxiproxyService
from driftlab.scenarios.pipeline.links import Reach


def _listening(pid: int) -> list[str]:
    """Local addresses (hex, as /proc/net shows them) of the TCP sockets `pid` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append(fields[1])
    return found


LOOPBACK_HEX = ("0100007F", "0000000000000000FFFF00000100007F")  # 127.0.0.1, ::ffff:127.0.0.1


@pytest.mark.spark
def test_the_spark_driver_listens_on_loopback_only(spark: Any) -> None:
    session = spark
    session.range(10).count()  # the block manager is up once a job has run
    jvm = session.sparkContext._gateway.proc.pid
    addresses = _listening(jvm)
    assert addresses, "the JVM listens on nothing: the check would prove nothing"
    outside = [a for a in addresses if a.rsplit(":", 1)[0] not in LOOPBACK_HEX]
    assert not outside, f"listening beyond loopback: {outside}"


@pytest.mark.services
def test_postgres_trusts_no_local_user(stack: Stack) -> None:
    stack.up("postgres")
    pg = stack["postgres"]
    assert isinstance(pg, PostgresService)
    hba = (pg.data_dir / "pg_hba.conf").read_text()
    rules = [line.split() for line in hba.splitlines() if line and not line.startswith("#")]
    assert rules and all(rule[-1] == "scram-sha-256" for rule in rules), hba
    assert stat.S_IMODE(pg.socket_dir.stat().st_mode) == 0o700
    if os.geteuid() != 0:
        return  # the probe below needs another account to run as
    # Any other local account, through the socket or TCP, without the password: refused.
    psql = str(POSTGRES_BIN / "psql")
    port = str(pg.spec.port())
    for host in (str(pg.socket_dir), "127.0.0.1"):
        done = subprocess.run(
            ["su", "nobody", "-s", "/bin/sh", "-c", f"{psql} -w -h {host} -p {port} "
             "-U driftlab -d driftlab -c 'SELECT usesuper FROM pg_user'"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode != 0, done.stdout
        assert "Permission denied" in done.stderr or "no password supplied" in done.stderr


KAFKA_PROBE = """\
import java.io.FileInputStream;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Lists topics, produces one record and reads a topic on each bootstrap address given,
 * all at once, each within the budget given (ms); an address "controller=<host:port>" is
 * a controller listener, asked to describe the cluster. Prints one line per attempt:
 * "<address> <operation> <outcome> <ms taken>". */
public class KafkaProbe {
    public static void main(String[] args) throws Exception {
        Properties login = new Properties();
        if (!args[1].isEmpty()) {
            try (FileInputStream in = new FileInputStream(args[1])) { login.load(in); }
        }
        String topic = args[0];
        long budget = Long.parseLong(args[2]);
        ExecutorService pool = Executors.newCachedThreadPool();
        List<Future<String>> done = new java.util.ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            Properties p = new Properties();
            p.putAll(login);
            String at = args[i];
            boolean controller = at.startsWith("controller=");
            p.put(controller ? "bootstrap.controllers" : "bootstrap.servers",
                  at.substring(at.indexOf('=') + 1));
            for (String key : List.of("request.timeout.ms", "default.api.timeout.ms",
                                      "max.block.ms", "delivery.timeout.ms")) {
                p.put(key, String.valueOf(budget));
            }
            p.put("linger.ms", "0");
            if (controller) {
                done.add(pool.submit(() -> timed(at, "describe", () -> describe(p, budget))));
                continue;
            }
            done.add(pool.submit(() -> timed(at, "list", () -> list(p, topic, budget))));
            done.add(pool.submit(() -> timed(at, "produce", () -> produce(p, topic, budget))));
            done.add(pool.submit(() -> timed(at, "consume", () -> consume(p, topic, budget))));
        }
        for (Future<String> f : done) System.out.println(f.get());
        pool.shutdownNow();
        System.exit(0);
    }

    static String timed(String at, String operation, Callable<String> call) throws Exception {
        long begun = System.nanoTime();
        String outcome = call.call();
        return at + " " + operation + " " + outcome + " " + (System.nanoTime() - begun) / 1000000;
    }

    static String refused(Exception e) {
        Throwable t = e;
        while (t.getCause() != null) t = t.getCause();
        return "refused:" + t.getClass().getSimpleName();
    }

    static String list(Properties p, String topic, long budget) {
        try (Admin admin = Admin.create(p)) {
            boolean found = admin.listTopics().names().get(budget, TimeUnit.MILLISECONDS)
                .contains(topic);
            return found ? "ok" : "missing";
        } catch (Exception e) { return refused(e); }
    }

    static String describe(Properties p, long budget) {
        try (Admin admin = Admin.create(p)) {
            admin.describeCluster().nodes().get(budget, TimeUnit.MILLISECONDS);
            return "ok";
        } catch (Exception e) { return refused(e); }
    }

    static String produce(Properties p, String topic, long budget) {
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            producer.send(new ProducerRecord<>(topic, "probe", "probe"))
                .get(budget, TimeUnit.MILLISECONDS);
            return "ok";
        } catch (Exception e) { return refused(e); }
    }

    static String consume(Properties p, String topic, long budget) {
        p.put("group.id", "probe-" + UUID.randomUUID());
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.nanoTime() + budget * 1000000;
            while (System.nanoTime() < deadline) {
                if (consumer.poll(Duration.ofMillis(500)).count() > 0) return "ok";
            }
            return "nothing";
        } catch (Exception e) { return refused(e); }
    }
}
"""
"""A Java client of Kafka (the vendored kafka-clients, run as a source file) that lists
topics, produces and consumes on each address it is given, with the login file given
(or none), and prints each outcome: a stranger's probe and the lab's are the same code."""

STRANGER = "nobody"
LAB_BUDGET_MS = 90_000
"""How long each of the lab's own attempts may take: it answers as soon as it succeeds,
and the machine may be loaded."""


def _probe_kafka(
    login: Path | None, topic: str, addresses: list[str], user: str | None, budget_ms: int
) -> dict[tuple[str, str], tuple[str, int]]:
    """{(address, operation): (outcome, ms taken)} of KafkaProbe run as `user` (None: as
    this process's user), each attempt given `budget_ms`."""
    folder = Path(tempfile.mkdtemp(prefix="driftlab-kafka-probe-"))
    try:
        folder.chmod(0o755)  # the stranger reads the probe's source
        source = folder / "KafkaProbe.java"
        source.write_text(KAFKA_PROBE)
        argv = [jvm.java_binary(), "-cp", f"{jvm.libs_dir()}/*", str(source), topic,
                str(login or ""), str(budget_ms), *addresses]  # fmt: skip
        if user is not None:
            argv = ["su", user, "-s", "/bin/sh", "-c", shlex.join(argv)]
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=budget_ms / 1000 + 120, check=False
        )
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    assert done.returncode == 0, done.stderr[-2000:]
    found = {}
    for line in done.stdout.splitlines():
        address, operation, outcome, took = line.split(" ")
        found[address, operation] = (outcome, int(took))
    expected = sum(1 if a.startswith("controller=") else 3 for a in addresses)
    assert len(found) == expected, done.stdout
    return found


def _outcomes(found: dict[tuple[str, str], tuple[str, int]]) -> set[str]:
    return {outcome for outcome, _ in found.values()}


@pytest.fixture
def kafka_with_a_record(stack: Stack) -> Iterator[tuple[KafkaCluster, str]]:
    """The stack's Kafka and a topic holding one record, written by the lab's client."""
    stack.up("kafka")
    kafka = stack["kafka"]
    assert isinstance(kafka, KafkaCluster)
    topic = "lockdown-probe"
    create_topics(kafka_client_config(stack), [TopicSpec(topic)])
    producer = Producer(kafka_client_config(stack, settings={"acks": "all"}))
    producer.produce(topic, b"the lab's record")
    assert producer.flush(30) == 0
    yield kafka, topic


@pytest.mark.services
def test_kafka_takes_no_client_without_the_stacks_login(
    stack: Stack, kafka_with_a_record: tuple[KafkaCluster, str]
) -> None:
    kafka, topic = kafka_with_a_record
    # The nodes themselves, and a Toxiproxy link in front of them.
    addresses = [kafka.bootstrap_servers, kafka.link(stack.links, "stranger")]
    controller = f"controller=127.0.0.1:{kafka.nodes[0].spec.port('controller')}"
    # The lab's login (the file a pipeline's JVM process is given) does everything, and
    # the controllers' own PLAIN login opens their listener (two probes at once).
    plain = stack.root / "controller-login.properties"
    os.close(os.open(plain, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    plain.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="controller" password="{kafka.spec.secret("controller")}";\n'
    )
    try:
        with ThreadPoolExecutor(2) as pool:
            lab_probe = pool.submit(
                _probe_kafka, kafka.client_properties(), topic, addresses, None, LAB_BUDGET_MS
            )
            own_probe = pool.submit(_probe_kafka, plain, topic, [controller], None, LAB_BUDGET_MS)
            lab, own = lab_probe.result(), own_probe.result()
    finally:
        plain.unlink()
    assert _outcomes(lab) == {"ok"} and _outcomes(own) == {"ok"}, (lab, own)
    addresses.append(controller)
    # ... another local account, without it or with a guessed password, nothing, though
    # each attempt is given twice as long as the lab's slowest needed (15 s at least).
    budget = max(15_000, 2 * max(took for _, took in [*lab.values(), *own.values()]))
    stranger = STRANGER if os.geteuid() == 0 else None
    guess = Path(tempfile.mkdtemp(prefix="driftlab-guess-")) / "guess.properties"
    guess.parent.chmod(0o755)
    guess.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="driftlab" password="driftlab";\n'
    )
    guess.chmod(0o644)
    try:
        with ThreadPoolExecutor(2) as pool:
            probes = [pool.submit(_probe_kafka, login, topic, addresses, stranger, budget)
                      for login in (None, guess)]  # fmt: skip
            refused = [probe.result() for probe in probes]
    finally:
        guess.unlink()
        guess.parent.rmdir()
    for found in refused:
        assert "ok" not in _outcomes(found), found
    # A wrong password is refused as such by the brokers (the controllers take no SCRAM).
    brokers = {k: v for k, v in refused[1].items() if k[0] != controller}
    assert _outcomes(brokers) == {"refused:SaslAuthenticationException"}, refused[1]
    # No command line of the stack (any local user reads /proc/<pid>/cmdline) shows a
    # password of Kafka's.
    secrets = [kafka.spec.secret("scram"), kafka.spec.secret("controller")]
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue
        assert not any(secret in text for secret in secrets), cmdline
    # Nor does a log of the stack (Kafka's, and Connect's when it runs).
    logs = list((stack.root / "logs").glob("*.log"))
    assert any(log.name.startswith("kafka") for log in logs)
    for log in logs:
        assert not any(secret in log.read_text(errors="replace") for secret in secrets), log
    if os.geteuid() != 0:
        return
    # The files that hold them are the stack user's alone, and so are the topics' segments.
    private = [kafka.client_properties(), kafka.nodes[0].properties_path, stack.root / STATE_FILE]
    for path in [*private, kafka.nodes[0].storage_dir]:
        done = subprocess.run(
            ["su", STRANGER, "-s", "/bin/sh", "-c", f"ls {path} && cat {path}"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode != 0 and "Permission denied" in done.stderr, path


@pytest.mark.services
def test_a_pipeline_process_gets_a_working_kafka_login(
    stack: Stack, kafka_with_a_record: tuple[KafkaCluster, str]
) -> None:
    kafka, topic = kafka_with_a_record
    fields = Reach(stack).values("mirror", ("kafka",))["kafka"]
    assert fields.bootstrap == kafka.link(stack.links, "mirror")
    assert (fields.security_protocol, fields.sasl_mechanism) == ("SASL_PLAINTEXT", "SCRAM-SHA-256")
    # What a librdkafka process does with its templated environment.
    admin = AdminClient(
        {
            "bootstrap.servers": fields.bootstrap,
            "security.protocol": fields.security_protocol,
            "sasl.mechanism": fields.sasl_mechanism,
            "sasl.username": fields.username,
            "sasl.password": fields.password,
        }
    )
    assert topic in admin.list_topics(timeout=10).topics
    login = Path(fields.client_properties)
    assert login == kafka.client_properties_path
    assert stat.S_IMODE(login.stat().st_mode) == 0o600
    assert fields.password in login.read_text()


def test_kafka_keeps_its_passwords_private_whatever_the_umask(tmp_path: Path) -> None:
    spec = ServiceSpec("kafka", tmp_path)
    node = KafkaCluster(spec, KafkaSettings()).nodes[0]
    old = os.umask(0)
    try:
        node.prepare()  # writes the configs and formats the storage with the SCRAM user
    finally:
        os.umask(old)
    assert stat.S_IMODE(spec.data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(node.properties_path.stat().st_mode) == 0o600
    server = node.properties_path.read_text()
    assert "sasl.mechanism.controller.protocol=PLAIN" in server
    assert "CLIENT:SASL_PLAINTEXT" in server
    # The format's argument file, which held the SCRAM password, is gone; the log that
    # any local user may read names no password.
    assert not list(spec.data_dir.glob("*.args"))
    log = node.log_path.read_text()
    assert "Formatting" in log
    assert spec.secrets["scram"] not in log and spec.secrets["controller"] not in log


# Run as another account: how far a stranger gets with the stack's Toxiproxy. It may
# enter the service's folder and reach a link's port (loopback is open to all), but
# connecting to the API's socket must fail.
STRANGER_PROBE = """
import os, socket, sys
api, link_port = sys.argv[1], int(sys.argv[2])
os.stat(os.path.dirname(os.path.dirname(api)))
print("entered the service folder")
socket.create_connection(("127.0.0.1", link_port), timeout=5).close()
print("reached the link")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect(api)
    sock.sendall(b"GET /proxies HTTP/1.0\\r\\n\\r\\n")
    print("API answered:", sock.recv(200))
except OSError as exc:
    print("API refused:", type(exc).__name__)
"""


@pytest.mark.services
def test_toxiproxy_api_is_closed_to_other_local_users(stack: Stack) -> None:
    stack.up("redis")
    link = stack.link("app", "redis")
    toxiproxy = stack["toxiproxy"]
    assert isinstance(toxiproxy, ToxiproxyService)
    api = toxiproxy.socket_path
    assert stat.S_ISSOCK(api.stat().st_mode)
    assert stat.S_IMODE(api.parent.stat().st_mode) == 0o700
    # No API on TCP: the server's only listeners are its links'.
    assert toxiproxy.process is not None
    ports = {int(a.rsplit(":", 1)[1], 16) for a in _listening(toxiproxy.process.pid)}
    assert link.port in ports
    # Every proxy the server holds, the links of earlier tests on this stack included.
    assert ports == {int(i.listen.rsplit(":", 1)[1]) for i in stack.links.list()}
    # The lab's own client lists the links and adds and removes a toxic.
    link_name = "app->redis"
    stack.links.latency(link_name, 50)
    assert [i.toxics for i in stack.links.list() if i.name == link_name] == [
        ("latency_downstream", "latency_upstream")
    ]
    stack.links.heal(link_name)
    assert [i.toxics for i in stack.links.list() if i.name == link_name] == [()]
    if os.geteuid() != 0:
        return  # the probe below needs another account to run as
    done = subprocess.run(
        ["su", "nobody", "-s", "/bin/sh", "-c",
         f"/usr/bin/python3 -c '{STRANGER_PROBE}' {api} {link.port}"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert "entered the service folder" in said, said
    assert "reached the link" in said, said
    assert "API refused: PermissionError" in said, said
    assert [i.toxics for i in stack.links.list() if i.name == link_name] == [()]
