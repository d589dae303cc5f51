"""The pipeline file's loader: what it accepts, and one line naming the field and the
fix for what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftlab.harness.app.pipeline import scenario_for
from driftlab.harness.app.run import check_scenario
from driftlab.scenarios.catalogue.architectures import SETUPS, setup_services
from driftlab.scenarios.pipeline.setup import PipelineSetup
from driftlab.scenarios.pipeline.shapes import SHAPES, starting_file
from driftlab.scenarios.pipeline.spec import PipelineError, load

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis"

MINIMAL = """
services = ["postgres", "redis"]
[processes.mirror]
command = ["bash", "mirror.sh"]
env = { DSN = "{postgres.dsn}", URL = "{redis.url}", P = "{namespace}:" }
ready = { log = "ready" }
[stores.cache]
redis = { pattern = "{namespace}:*", field = "value" }
"""


def write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(PipelineError) as info:
        load(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_minimal_file_gets_defaults(tmp_path: Path) -> None:
    p = load(write(tmp_path, MINIMAL, "my-pipe.toml"))
    assert p.name == "my-pipe"
    assert p.services == ("postgres", "redis")
    assert p.source.table == "items" and not p.source.own_sql
    (proc,) = p.processes
    assert proc.command == ("bash", "mirror.sh") and proc.ready_log == "ready"
    (store,) = p.stores
    assert (store.kind, store.redis.pattern, store.redis.field) == (
        "mirror",
        "{namespace}:*",
        "value",
    )
    assert p.workload.mix == {"write": 1.0}
    assert p.faults.faults == () and p.expectations == {}
    assert p.folder == tmp_path


def test_the_examples_and_every_starting_file_load(tmp_path: Path) -> None:
    good = load(EXAMPLES / "pipeline.toml")
    bug = load(EXAMPLES / "pipeline-bug.toml")
    assert [f.target for f in good.faults.faults] == ["mirror", "mirror->redis", "mirror"]
    assert good.expectations["missing"] == "absent"
    assert bug.processes[0].env["SKIP_AHEAD_ON_RESTART"] == "1"
    for shape in SHAPES:
        p = load(write(tmp_path, starting_file(shape, f"my-{shape}"), f"{shape}.toml"))
        assert p.name == f"my-{shape}"
        assert p.faults.faults, shape
        # Every window closes before the last `recovery` seconds: none is cut or dropped.
        assert p.faults.fitted(p.workload.duration).faults == p.faults.faults, shape


@pytest.mark.parametrize(
    "path",
    sorted(
        [*EXAMPLES.parent.glob("*/*.toml"), *(Path(__file__).parent / "pipelines").glob("*.toml")]
    ),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_every_example_and_test_pipeline_file_loads(path: Path) -> None:
    p = load(path)
    assert p.stores and p.folder == path.parent
    assert "postgres" in p.reached


def test_a_short_run_keeps_every_fault_and_its_recovery_in_proportion() -> None:
    # A candidate of an exploration runs a few seconds: the example's 3 s recovery,
    # kept whole, would leave a 3 s run no room for any of its faults.
    sc = scenario_for(load(EXAMPLES / "pipeline.toml"), duration=3.0)
    assert sc.workload.duration == 3.0
    assert sc.faults.recovery == pytest.approx(0.9)
    assert [f.target for f in sc.faults.faults] == ["mirror", "mirror->redis", "mirror"]
    assert all(f.until <= 3.0 - 0.9 + 1e-9 for f in sc.faults.faults)
    # A longer run keeps the file's recovery: more room needs no longer one.
    sc = scenario_for(load(EXAMPLES / "pipeline.toml"), duration=30.0)
    assert sc.faults.recovery == 3.0


def test_a_pipeline_scenario_carries_its_setup_and_registers_nothing() -> None:
    known = dict(SETUPS)
    sc = scenario_for(load(EXAMPLES / "pipeline.toml"), duration=3.0)
    assert known == SETUPS
    setup = check_scenario(sc)()
    assert isinstance(setup, PipelineSetup) and setup.pipeline.name == "pg-to-redis"
    assert setup.name == sc.setup == "pipeline:pg-to-redis"
    assert setup.services == setup_services(sc) == ("postgres", "redis")
    # Each run builds its own: nothing of one run reaches the next through a class.
    assert check_scenario(sc)() is not setup


def test_own_sql_source(tmp_path: Path) -> None:
    text = (
        MINIMAL
        + """
[source]
create = "CREATE TABLE {source.table} (key text PRIMARY KEY, value text, version int)"
write = "UPDATE {source.table} SET value = {value} WHERE key = {key} RETURNING version"
read = "SELECT key, value FROM {source.table}"
"""
    )
    assert load(write(tmp_path, text)).source.own_sql


def edit(change: str) -> str:
    """MINIMAL with the line of `change`'s key replaced by it, or with it added first."""
    key = change.split(" = ")[0]
    lines = [change if line.startswith(f"{key} = ") else line for line in MINIMAL.splitlines()]
    if change not in lines:
        lines.insert(1, change)
    return "\n".join(lines)


def fault(kind: str, target: str, at: float | None = 1) -> str:
    """MINIMAL with one fault (without `at` if None)."""
    when = "" if at is None else f"at = {at}\n"
    return MINIMAL + f'\n[[faults]]\nkind = "{kind}"\ntarget = "{target}"\n{when}'


def external(service: str, url: str) -> str:
    """MINIMAL with `service` reached at `url`."""
    return edit(f'external = {{ {service} = "{url}" }}')


@pytest.mark.parametrize(
    ("text", "field", "fix"),
    [
        (edit('services = ["postgres", "mysql"]'), "services", "use: postgres"),
        (edit('services = ["redis"]'), "services", 'add "postgres"'),
        (edit('command = "bash mirror.sh"'), "processes.mirror.command", "write a list"),
        (edit('ready = { log = "r", tcp = 80 }'), "processes.mirror.ready", "keep one"),
        (edit("ready = { port = 80 }"), "processes.mirror.ready.port", "use one of: tcp"),
        (edit('env = { DSN = "{kafka.bootstrap}" }'), "processes.mirror.env.DSN", 'add "kafka"'),
        (edit('env = { DSN = "{postgres.url}" }'), "processes.mirror.env.DSN", "use one of"),
        (
            edit('command = ["psql", "-W", "{postgres.password}"]'),
            "processes.mirror.command",
            'give it in env instead: SECRET = "{postgres.password}"',
        ),
        (
            edit('command = ["consumer", "--amqp={rabbitmq.url}"]').replace(
                '"redis"]', '"redis", "rabbitmq"]'
            ),
            "processes.mirror.command",
            "a password, on the command line",
        ),
        (edit('redis = { pattern = "{namespace}:" }'), "stores.cache.redis.pattern", "one *"),
        (edit('colour = "blue"'), "colour", "use one of"),
        (fault("crash", "consumer"), "faults[0].target", "mirror"),
        (fault("cut", "mirror->kafka"), "faults[0].target", "mirror->redis"),
        (fault("app-crash", "app"), "faults[0].kind", "use crash"),
        (fault("melt", "mirror"), "faults[0]", "unknown"),
        (fault("crash", "mirror", at=None), "faults[0]", "'at'"),
        (external("rabbitmq", "amqp://127.0.0.1:5672"), "external.rabbitmq", "use one of"),
        (external("kafka", "kafka://127.0.0.1:9092"), "external.kafka", "host:port"),
        (external("redis", "127.0.0.1:6379"), "external.redis", "redis://"),
        (external("postgres", "postgresql://u@127.0.0.1/db"), "external.postgres", "host:port"),
        # A misspelt key is named before the field it leaves missing.
        (edit('external = { kafka = { bootstrp = "h:1" } }'), "external.kafka.bootstrp", "use"),
        (edit("env = { DSN = 1 }"), "processes.mirror.env.DSN", "write a string in quotes"),
        (edit('command = ["bash", 1]'), "processes.mirror.command[1]", "a string in quotes"),
        (edit('command = ["bash", "{nope}"]'), "processes.mirror.command[1]", "is not known"),
        (MINIMAL + "[converge]\nsample_ms = 10\n", "converge.sample_ms", "20 ms or more"),
        (MINIMAL + "[converge]\ntimeout = -1\n", "converge.timeout", "a number >= 0"),
        (edit("source = 3"), "source", "write a [source] table"),
    ],
)
def test_a_bad_field_is_named_with_its_fix(tmp_path: Path, text: str, field: str, fix: str) -> None:
    message = refused(tmp_path, text)
    assert message.startswith(f"{field}:"), message
    assert fix in message, message


def test_links_of_processes_and_services_are_fault_targets(tmp_path: Path) -> None:
    text = (
        MINIMAL
        + """
[[faults]]
kind = "cut"
target = "redis"
at = 1
[[faults]]
kind = "latency"
target = "mirror->postgres"
at = 2
ms = 50
[[faults]]
kind = "pause"
target = "mirror"
at = 3
"""
    )
    faults = load(write(tmp_path, text)).faults.faults
    assert [(f.kind, f.target) for f in faults] == [
        ("cut", "redis"),
        ("latency", "mirror->postgres"),
        ("pause", "mirror"),
    ]
    assert faults[1].params == {"ms": 50}


def test_expectations_workload_and_syntax(tmp_path: Path) -> None:
    assert "expect.absent" in refused(tmp_path, MINIMAL + '[expect]\nabsent = ["lost"]\n')
    # A kind no pipeline run can have a chance to find would end every run inconclusive.
    # stale-overwrite is judged from the versions a store shows: refused without one.
    unversioned = refused(tmp_path, MINIMAL + '[expect]\nabsent = ["missing", "stale-overwrite"]\n')
    assert unversioned.startswith("expect.absent: 'stale-overwrite' is judged from the versions")
    assert "version_field" in unversioned
    versioned = MINIMAL.replace('field = "value" }', 'field = "value", version_field = "v" }')
    p = load(write(tmp_path, versioned + '[expect]\nabsent = ["stale-overwrite"]\n'))
    assert p.expectations == {"stale-overwrite": "absent"}
    assert "cannot be judged" in refused(
        tmp_path, MINIMAL + '[expect]\npresent = ["lost-message"]\n'
    )
    assert refused(tmp_path, MINIMAL + "[workload]\nclients = 0\n").startswith("workload:")
    assert "workload.read_stores" in refused(
        tmp_path, MINIMAL + '[workload]\nread_stores = ["search"]\n'
    )
    assert "not valid TOML" in refused(tmp_path, MINIMAL + "[stores\n")
    assert "is a log store read from redis" in refused(
        tmp_path, MINIMAL.replace("[stores.cache]", '[stores.cache]\nkind = "log"')
    )
    audit = MINIMAL + '[stores.audit]\nkind = "log"\nsql = { query = "SELECT k, v FROM a" }\n'
    assert load(write(tmp_path, audit)).stores[1].kind == "log"
    with pytest.raises(PipelineError, match="cannot be read"):
        load(tmp_path / "absent.toml")
    p = load(write(tmp_path, MINIMAL + '[expect]\npresent = ["stale"]\nabsent = ["missing"]\n'))
    assert p.expectations == {"stale": "present", "missing": "absent"}


KAFKA_AND_HTTP = (
    MINIMAL.replace('"redis"]', '"redis", "kafka"]')
    + """
[processes.shop]
command = ["./shop"]
[stores.topic]
kind = "log"
kafka = { topic = "{namespace}.items", key_field = "key", value_field = "after.value" }
[stores.api]
http = { url = "{shop.url}/items", version_field = "version" }
"""
)


def test_kafka_and_http_stores(tmp_path: Path) -> None:
    p = load(write(tmp_path, KAFKA_AND_HTTP))
    _, topic, api = p.stores
    assert (topic.kind, topic.kafka.topic) == ("log", "{namespace}.items")
    assert (topic.fields.key, topic.fields.value, topic.fields.version) == (
        "key",
        "after.value",
        None,
    )
    assert api.http.url == "{shop.url}/items" and api.versioned
    assert not topic.versioned and p.stores[0].versioned is False
    no_kafka = KAFKA_AND_HTTP.replace('"redis", "kafka"]', '"redis"]')
    assert refused(tmp_path, no_kafka).startswith("stores.topic.kafka: reads kafka, not in")
    bad_path = KAFKA_AND_HTTP.replace('"after.value"', '"after..value"')
    assert refused(tmp_path, bad_path).startswith("stores.topic.kafka.value_field: is")
    bad_url = KAFKA_AND_HTTP.replace("{shop.url}", "{web.url}")
    assert refused(tmp_path, bad_url).startswith("stores.api.http.url: is '{web.url}/items'")
    unknown = KAFKA_AND_HTTP.replace("{shop.url}/items", "http://127.0.0.1:{web.port}/items")
    assert refused(tmp_path, unknown).startswith("stores.api.http.url: {web.port} is not known")
    both = KAFKA_AND_HTTP.replace("[stores.api]\n", '[stores.api]\nsql = { query = "x" }\n')
    assert "needs one reader" in refused(tmp_path, both)


def test_external_services_by_url(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        'services = ["postgres", "redis"]',
        'services = []\nexternal = { postgres = "postgresql://app:s%40cret@127.0.0.1:5433/shop", '
        'redis = "redis://default:pw@127.0.0.1:6380/0" }',
    )
    p = load(write(tmp_path, text))
    assert p.services == () and p.reached == ("postgres", "redis")
    pg = p.external["postgres"]
    assert (pg.host, pg.port) == ("127.0.0.1", 5433)
    assert pg.extra == {"user": "app", "password": "s@cret", "dbname": "shop"}
    assert p.external["redis"].extra == {"password": "pw"}
    both = 'external = { redis = "redis://127.0.0.1:6380" }\n' + MINIMAL
    assert "is external too" in refused(tmp_path, both)


CONNECTORS = """
services = ["postgres", "kafka", "connect"]
[[connectors]]
name = "sink"
[connectors.config]
"connector.class" = "io.debezium.connector.jdbc.JdbcSinkConnector"
"tasks.max" = 1
"delete.enabled" = true
"connection.url" = "{postgres.jdbc_url}"
"connection.password" = "{postgres.password}"
"collection.name.format" = "{namespace}.${topic}"
"transforms.route.regex" = "([^.]+)\\\\.items"
[stores.mirror]
sql = { query = "SELECT key, value FROM {namespace}.mirror" }
"""


def test_connectors_as_configs_inline_or_in_json_files(tmp_path: Path) -> None:
    from driftlab.scenarios.pipeline.connectors import for_run

    (inline,) = load(write(tmp_path, CONNECTORS)).connectors
    assert inline.name == "sink" and inline.config["tasks.max"] == "1"
    assert inline.config["delete.enabled"] == "true"
    values = {
        "namespace": "ns",
        "postgres": type(
            "L", (), {"jdbc_url": "jdbc:postgresql://127.0.0.1:1/db", "password": "pw"}
        ),
    }
    (run,) = for_run((inline,), "ns", values)
    config = run.config()
    assert config["name"] == "ns_sink"
    assert config["connection.url"] == "jdbc:postgresql://127.0.0.1:1/db"
    # Connect's own ${...} references are kept as written; a regex's backslash too.
    assert config["collection.name.format"] == "ns.${topic}"
    assert config["transforms.route.regex"] == "([^.]+)\\.items"
    good = load(EXAMPLES.parent / "pg_to_pg_jdbc" / "pipeline.toml")
    bug = load(EXAMPLES.parent / "pg_to_pg_jdbc" / "pipeline-bug.toml")
    assert [c.name for c in good.connectors] == ["source", "sink"]
    assert good.connectors[0].config["database.password"] == "{postgres.password}"
    assert bug.connectors[0].config["skipped.operations"] == "t,u"
    # The worker's own links are fault targets once it runs connectors.
    assert [f.target for f in good.faults.faults] == ["connect->postgres", "connect"]


@pytest.mark.parametrize(
    ("change", "field", "fix"),
    [
        (('"connect"]', '"redis"]'), "connectors:", 'add "connect" to services'),
        (('name = "sink"', 'name = "sink"\nfile = "x.json"'), "connectors[0]:", "one of"),
        (('"connector.class" = ', '"x" = '), "connectors[0].config:", "connector.class"),
        (("{postgres.jdbc_url}", "{redis.url}"), "connectors[0].config.connection.url", "redis"),
        (('"tasks.max" = 1', '"tasks.max" = [1]'), "connectors[0].config.tasks.max", "string"),
    ],
)
def test_a_bad_connector_is_named_with_its_fix(
    tmp_path: Path, change: tuple[str, str], field: str, fix: str
) -> None:
    message = refused(tmp_path, CONNECTORS.replace(*change))
    assert message.startswith(field) and fix in message, message


def test_a_connector_file_that_is_not_json_is_named(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text("{not json")
    text = CONNECTORS.split("[[connectors]]")[0] + '[[connectors]]\nfile = "c.json"\n'
    text += CONNECTORS.split("[stores.mirror]")[1].join(["[stores.mirror]", ""])
    message = refused(tmp_path, text)
    assert message.startswith("connectors[0].file: 'c.json' is not JSON"), message
