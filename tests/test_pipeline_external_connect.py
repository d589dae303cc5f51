"""A pipeline made only of configuration on the user's own Kafka Connect worker: its
connectors put on the worker through its REST URL (`external.connect`), the worker's
Kafka given by its bootstrap servers (`external.kafka`, reached with no link: its
brokers advertise their own address). The user's worker here is a plain-HTTP standalone
worker the test starts on its own, on Kafka's jars and Debezium's plugins; it reaches
PostgreSQL through the link driftlab makes for it (`connect->postgres`), which the
schedule slows. Example 2's correct pipeline passes; its planted bug is caught."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftlab.harness.app.pipeline import run_pipeline
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.services import jvm
from driftlab.harness.lab.services.ports import LOOPBACK, free_port
from driftlab.harness.lab.services.process import SupervisedProcess
from driftlab.harness.lab.services.runtime import LocalRuntime
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.pipeline.spec import PipelineError, load

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pg_to_pg_jdbc"


def external_file(tmp_path: Path, name: str) -> Path:
    """Example 2's file `name` without its crash of the worker (an external one is not
    driftlab's to crash), its cut of the worker's link to PostgreSQL made a slow link,
    its connector files named from anywhere. With no crash to restart it, a cut can kill
    the JDBC sink's task for good, even with `connection.restart.on.errors` (a pipeline
    outcome the run names, tested in test_pipeline_jdbc_example): this test is about the
    user's worker, reached through driftlab's links."""
    text = (EXAMPLE / name).read_text()
    text = re.sub(r'\[\[faults\]\]\nkind = "crash".*?\n\n', "", text, flags=re.S)
    text = text.replace('kind = "cut"', 'kind = "latency"\nms = 300')
    shutil.copy(EXAMPLE / "source.json", tmp_path)
    # The sink reopens a connection that failed (one over a slow link may time out).
    sink = json.loads((EXAMPLE / "sink.json").read_text())
    sink["config"]["connection.restart.on.errors"] = "true"
    (tmp_path / "sink.json").write_text(json.dumps(sink))
    path = tmp_path / name
    path.write_text(text)
    return path


def test_external_kafka_and_connect_are_read_and_checked(tmp_path: Path) -> None:
    def write(text: str) -> Path:
        path = tmp_path / "p.toml"
        path.write_text(text)
        return path

    base = """
services = ["postgres"]
[processes.relay]
command = ["true"]
env = { BOOT = "{kafka.bootstrap}" }
[stores.s]
kind = "mirror"
sql = { query = "SELECT 1" }
"""
    ext = (
        'external = { kafka = { bootstrap = "127.0.0.1:9092, 127.0.0.1:9093", '
        'user = "u", password = "p" } }'
    )
    user = base.replace("}\n[stores", ', USER = "{kafka.user}" }\n[stores')
    p = load(write(ext + user))
    assert p.external["kafka"].extra == {
        "bootstrap": "127.0.0.1:9092,127.0.0.1:9093",
        "user": "u",
        "password": "p",
    }
    # {kafka.user} only where the file gives one.
    plain = 'external = { kafka = "127.0.0.1:9092" }'
    with pytest.raises(PipelineError, match=r"\{kafka\.user\} is not known"):
        load(write(plain + user))
    with pytest.raises(PipelineError, match=r"^external\.kafka: has 'nowhere', not host:port"):
        load(write('external = { kafka = "nowhere" }' + base))
    # A link fault on an external Kafka would be bypassed: refused, with why.
    cut = '\n[[faults]]\nkind = "cut"\ntarget = "relay->kafka"\nat = 1\nduration = 1\n'
    with pytest.raises(PipelineError, match=r"^faults\[0\]\.target: 'relay->kafka' is an external"):
        load(write(plain + base + cut))
    # Connectors need a worker: driftlab's, or the user's by its REST URL; driftlab's
    # runs on driftlab's Kafka only.
    conn = '\n[[connectors]]\nname = "c"\nconfig = { "connector.class" = "x" }\n'
    with pytest.raises(PipelineError, match=r"^connectors: need a Connect worker"):
        load(write(plain + base + conn))
    mixed = base.replace('["postgres"]', '["postgres", "connect"]')
    with pytest.raises(PipelineError, match=r"^connectors: run on driftlab's Connect worker"):
        load(write(plain + mixed + conn))
    users = 'external = { kafka = "127.0.0.1:9092", connect = "http://127.0.0.1:8083" }'
    assert load(write(users + base + conn)).connectors[0].name == "c"
    with pytest.raises(PipelineError, match=r"^external\.connect: is 'ftp://h:1'"):
        load(write('external = { connect = "ftp://h:1" }' + base))


@pytest.fixture(scope="module")
def users_connect(stack: Stack) -> Iterator[tuple[str, str, Path]]:
    """The user's own Connect worker (plain HTTP, standalone) on a running Kafka: its
    REST URL, Kafka's bootstrap servers and the worker's log."""
    stack.up("kafka")
    bootstrap = stack["kafka"].bootstrap_servers
    root = Path(tempfile.mkdtemp(prefix="dl-users-connect-", dir="/tmp"))
    port = free_port()
    runtime = LocalRuntime()
    jvm.write_properties(
        root / "worker.properties",
        {
            "bootstrap.servers": bootstrap,
            # The user's worker logs in to the Kafka it is given, itself and its clients.
            **{
                f"{prefix}{key}": value
                for prefix in ("", "producer.", "consumer.", "admin.")
                for key, value in stack["kafka"].login.java_properties().items()
            },
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "offset.storage.file.filename": root / "offsets",
            "offset.flush.interval.ms": 2000,
            "plugin.path": runtime.kafka_plugins(),
            "plugin.discovery": "service_load",
            "listeners": f"http://{LOOPBACK}:{port}",
        },
    )
    argv = jvm.java_argv(
        "org.apache.kafka.connect.cli.ConnectStandalone",
        [root / "worker.properties"],
        heap="512m",
        log4j=jvm.write_log4j(root / "log4j.properties"),
        tmp_dir=root / "tmp",
        runtime=runtime,
    )
    worker = SupervisedProcess("users-connect", argv, root / "connect.log")
    url = f"http://{LOOPBACK}:{port}"
    try:
        worker.start()

        def answers() -> bool:
            try:
                with urllib.request.urlopen(url + "/connectors", timeout=2):
                    return True
            except OSError:
                return False

        worker.wait_until(answers, 120, "the user's Connect REST API answers")
        yield url, bootstrap, root / "connect.log"
    finally:
        worker.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.services
@pytest.mark.spark
@pytest.mark.slow
def test_connectors_run_on_the_users_worker_and_the_bug_is_caught(
    stack: Stack, users_connect: tuple[str, str, Path], spark: object, tmp_path: Path
) -> None:
    url, bootstrap, log = users_connect
    external = {"kafka": bootstrap, "connect": url}
    good = load(external_file(tmp_path, "pipeline.toml"), external)
    assert good.services == ("postgres",) and set(good.external) == {"kafka", "connect"}
    assert [f.target for f in good.faults.faults] == ["connect->postgres"]
    out = run_pipeline(good, seed=1, runs_dir=tmp_path / "runs", stack=stack)
    r = out.run
    assert r.error is None and out.not_converged == [], r.error
    assert r.exit_code == exitcodes.OK and r.fault_windows == 1 and not r.fault_errors
    # The connectors ran on the user's worker, which no longer holds them.
    assert re.search(r"dl_pg_to_pg_jdbc_\w+_sink", log.read_text())
    with urllib.request.urlopen(url + "/connectors", timeout=5) as answer:
        assert answer.read() == b"[]"
    bad = run_pipeline(
        load(external_file(tmp_path, "pipeline-bug.toml"), external),
        seed=1,
        runs_dir=tmp_path / "runs",
        stack=stack,
    )
    b = bad.run
    assert b.exit_code == exitcodes.VERDICT and b.counts.get("stale", 0) > 0, b.counts
    assert bad.not_converged and bad.not_converged[0].store == "mirror"
