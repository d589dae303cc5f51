"""The commented starting files `driftlab init --shape ...` writes.

Each is a valid pipeline file whose process commands are yours to fill in: the
shape decides the services, the source, the stores and a fault schedule that hurts
that shape where it is weak.
"""

from __future__ import annotations

_HEAD = """\
# A driftlab pipeline file ({shape}). driftlab starts the services, writes the source,
# runs your processes, injects the faults, reads your stores from outside and judges
# whether they stayed in sync. Run it with: driftlab run {file}
# Templates in strings are filled in per run: {{namespace}} (unique per run: use it for
# schemas, key prefixes, slot and topic names), {{postgres.dsn}}, {{redis.url}},
# {{kafka.bootstrap}} (Kafka asks for {{kafka.username}} and {{kafka.password}}),
# {{rabbitmq.url}}, {{source.table}}, ... Write {{{{ for a brace.
# Passwords go in env, never in command: every local user reads command lines (ps).
# {{postgres.dsn}} and {{redis.url}} hold none: driftlab sets PGPASSWORD (libpq, pgx)
# and REDISCLI_AUTH (redis-cli) for a process that uses them; a Redis library takes
# {{redis.password}} (REDIS_PASSWORD below). Your processes log in to PostgreSQL as
# the run's own role: logical replication and the run's schema, no superuser.
name = "{name}"
"""


_MIX = """mix = { write = 9, delete = 1 }  # one operation in ten deletes its key: it must go
"""


def _tail(
    timeout: int = 30,
    window: int = 3,
    why: str = "(converged or not)",
    duration: int = 10,
    mix: str = _MIX,
) -> str:
    """The workload, the expectations and the convergence wait."""
    return f"""
[workload]
clients = 4
keys = 8          # keys k0..k7 written by the workload
rate = 100        # writes per second, all clients together
duration = {duration}     # seconds
rotate_s = 1.0    # every second the writes move on to fresh keys, which keep their value
{mix}
[expect]
# Kinds of anomaly that fail the run (docs/checkers.md). A mirror that converges
# never misses a key nor keeps an old, invented or deleted value.
absent = ["missing", "stale", "phantom", "extra"]

[converge]
timeout = {timeout}  # after the faults heal, how long your stores may take to equal the source
window = {window}  # a store unchanged this long has settled {why}
"""


_ENV = {
    "PGDSN": "{postgres.dsn}",
    "REDIS_URL": "{redis.url}",
    "REDIS_PASSWORD": "{redis.password}",
    "BOOTSTRAP": "{kafka.bootstrap}",
    # Kafka takes no client without the stack's login: SASL_PLAINTEXT, SCRAM-SHA-256.
    "KAFKA_SECURITY_PROTOCOL": "{kafka.security_protocol}",
    "KAFKA_SASL_MECHANISM": "{kafka.sasl_mechanism}",
    "KAFKA_USERNAME": "{kafka.username}",
    "KAFKA_PASSWORD": "{kafka.password}",
    "KAFKA_CLIENT_PROPERTIES": "{kafka.client_properties}",
    "AMQP_URL": "{rabbitmq.url}",
    "TABLE": "{source.table}",
    "PREFIX": "{namespace}:",
    "TOPIC": "{namespace}",
    "QUEUE": "{namespace}",
    "OUTBOX": "{namespace}.outbox",
    "TARGET": "{namespace}.derived",
    "PORT": "{app_server.port}",
}
"""Each environment variable a starting file gives a process -> its template: one
meaning per name across the shapes."""

_KAFKA_LOGIN = (
    "KAFKA_SECURITY_PROTOCOL KAFKA_SASL_MECHANISM KAFKA_USERNAME KAFKA_PASSWORD "
    "KAFKA_CLIENT_PROPERTIES"
)
"""The variables of a Kafka client's login, after BOOTSTRAP."""


def _kafka_env(before: str, after: str) -> str:
    """A Kafka client's variables: `before`, BOOTSTRAP and the login, then `after`."""
    return " ".join(filter(None, (before, "BOOTSTRAP", _KAFKA_LOGIN, after)))


def _process(
    name: str, env: str, note: str = "", command: str = "", ready: str = 'log = "ready"'
) -> str:
    """A process's sections: its command (`./my-<name>` unless given), its readiness and
    the variables of `env` (names of _ENV, space-separated)."""
    head = f"[processes.{name}]" + (f"  # {note}" if note else "")
    lines = [head, f'command = ["{command or f"./my-{name}"}"]', f"ready = {{ {ready} }}", ""]
    lines.append(f"[processes.{name}.env]  # templated per run")
    lines += [f'{var} = "{_ENV[var]}"' for var in env.split()]
    return "\n".join(lines) + "\n"


def _faults(crash: str, cut: str, crash_s: float = 1.5, crash_note: str = "") -> str:
    """The schedule every shape starts with: `crash` (a process) at 2 s, then `cut` (a
    link) at 5 s."""
    why = crash_note or "SIGKILL of the process group; restarted when the window ends"
    return f"""[[faults]]
kind = "crash"  # {why}
target = "{crash}"
at = 2.0
duration = {crash_s}

[[faults]]
kind = "cut"    # the link stops passing bytes
target = "{cut}"
at = 5.0
duration = 1.5
"""


_CDC_CACHE = f"""\
summary = "A consumer of my own mirrors a PostgreSQL table into Redis"
services = ["postgres", "redis"]
recovery = 3.0  # seconds at the end of the workload kept free of faults

# driftlab creates <namespace>.items(key text, value text, version bigint) and writes
# it: every write bumps the key's version; a delete leaves a tombstone (value NULL).
[source]
table = "items"

# Your consumer: a command line (any language), its environment, and how driftlab
# knows it is ready (ready = {{ log = "..." }}, {{ tcp = 8080 }} or {{ http = "http://..." }}).
# It reaches each service through a link of its own (here mirror->postgres and
# mirror->redis), which the faults below can cut.
{_process("mirror", "PGDSN REDIS_URL REDIS_PASSWORD TABLE PREFIX", command="./my-consumer")}
# What your consumer derives, and how driftlab reads it. kind = "mirror": the latest
# value of each key (skipped intermediate versions are no loss).
[stores.cache]
kind = "mirror"
redis = {{ pattern = "{{namespace}}:*" }}  # add field = "value" if each key is a hash

{_faults("mirror", "mirror->redis")}"""

_OUTBOX = f"""\
summary = "An outbox relay and a consumer of my own carry a PostgreSQL table to Redis"
services = ["postgres", "kafka", "redis"]
recovery = 3.0

# Your own statements: each write updates the row and appends to the outbox in one
# transaction. {{key}} and {{value}} are the workload's; write returns the version.
[source]
create = \"\"\"
CREATE TABLE {{source.table}} (key text PRIMARY KEY, value text, version bigint NOT NULL);
CREATE TABLE {{namespace}}.outbox (id bigserial PRIMARY KEY, key text, value text, version bigint)
\"\"\"
write = \"\"\"
WITH w AS (
  INSERT INTO {{source.table}} AS t (key, value, version) VALUES ({{key}}, {{value}}, 1)
  ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = t.version + 1
  RETURNING key, value, version)
INSERT INTO {{namespace}}.outbox (key, value, version) SELECT key, value, version FROM w
RETURNING version
\"\"\"
# A delete leaves a tombstone (value NULL) in the table and the outbox.
delete = \"\"\"
WITH w AS (
  UPDATE {{source.table}} SET value = NULL, version = version + 1 WHERE key = {{key}}
  RETURNING key, value, version)
INSERT INTO {{namespace}}.outbox (key, value, version) SELECT key, value, version FROM w
RETURNING version
\"\"\"
read = "SELECT key, value, version FROM {{source.table}} WHERE value IS NOT NULL"

# Kafka's clients log in: librdkafka takes security.protocol, sasl.mechanism,
# sasl.username and sasl.password; a Java client reads KAFKA_CLIENT_PROPERTIES (its
# security.protocol, sasl.mechanism and sasl.jaas.config).
{_process("relay", _kafka_env("PGDSN", "OUTBOX TOPIC"), "reads the outbox, publishes to Kafka")}
{
    _process(
        "consumer",
        _kafka_env("", "TOPIC REDIS_URL REDIS_PASSWORD PREFIX"),
        "reads Kafka, writes Redis",
    )
}
[stores.cache]
kind = "mirror"
redis = {{ pattern = "{{namespace}}:*" }}

{_faults("relay", "consumer->kafka")}"""

_QUEUE = f"""\
summary = "A publisher and a queue worker of my own carry a PostgreSQL table to a second table"
services = ["postgres", "rabbitmq"]
recovery = 3.0

# Your DDL runs before your processes start; with it, driftlab's table is yours to
# create too (key, value, version). A delete leaves a tombstone (value NULL).
[source]
table = "items"
create = \"\"\"
CREATE TABLE {{source.table}} (key text PRIMARY KEY, value text, version bigint NOT NULL);
CREATE TABLE {{namespace}}.derived (key text PRIMARY KEY, value text, version bigint)
\"\"\"

{
    _process(
        "publisher",
        "PGDSN AMQP_URL TABLE QUEUE",
        "notices source changes, publishes them to a queue",
    )
}
{_process("worker", "AMQP_URL QUEUE PGDSN TARGET", "consumes the queue, writes the derived table")}
# A store read with SQL: key, value and optionally version of every row.
[stores.derived]
kind = "mirror"
sql = {{ query = "SELECT key, value, version FROM {{namespace}}.derived" }}

{_faults("worker", "worker->rabbitmq")}"""

_DUAL_WRITE = f"""\
summary = "My web application writes its database, then its cache"
services = ["postgres", "redis"]
recovery = 3.0

# Your application writes the source: driftlab sends each write as an HTTP request
# with the JSON body {{"key": ..., "value": ...}} (a "version" in the JSON answer is the
# write's), and each delete as the request http_delete, creates the table first and
# reads the truth back with SQL.
[source]
create = "CREATE TABLE {{source.table}} (key text PRIMARY KEY, value text, version bigint NOT NULL)"
http = "PUT http://127.0.0.1:{{app_server.port}}/items/{{key}}"
http_delete = "DELETE http://127.0.0.1:{{app_server.port}}/items/{{key}}"
read = "SELECT key, value, version FROM {{source.table}} WHERE value IS NOT NULL"

# {{app_server.port}} is a free port driftlab draws for this process, kept across restarts.
{
    _process(
        "app_server",
        "PGDSN REDIS_URL REDIS_PASSWORD TABLE PREFIX PORT",
        command="./my-app",
        ready='http = "http://127.0.0.1:{app_server.port}/health"',
    )
}
[stores.cache]
kind = "mirror"
redis = {{ pattern = "{{namespace}}:*", field = "value" }}

{
    _faults(
        "app_server", "app_server->redis", 1.0, "between (or during) the application's two writes"
    )
}"""

_CONNECTORS = """\
summary = "Debezium's PostgreSQL source and JDBC sink copy a table, on Kafka Connect"
services = ["postgres", "kafka", "connect"]
recovery = 4.0

# driftlab creates <namespace>.items(key text, value text, version bigint) and writes
# it: every write bumps the key's version; a delete leaves a tombstone (value NULL).
[source]
table = "items"

# No program of yours: Kafka Connect connectors, each the config you would POST to
# Connect. Their {postgres.host}-style placeholders are the worker's own links
# (connect->postgres, connect->kafka); {postgres.password} reaches Connect only as a
# ${file:...} reference. A slot and a publication named with {namespace} are dropped
# at the end of the run.
[[connectors]]
name = "source"
[connectors.config]
"connector.class" = "io.debezium.connector.postgresql.PostgresConnector"
"tasks.max" = 1
"plugin.name" = "pgoutput"
"database.hostname" = "{postgres.host}"
"database.port" = "{postgres.port}"
"database.user" = "{postgres.user}"
"database.password" = "{postgres.password}"
"database.dbname" = "{postgres.dbname}"
"topic.prefix" = "{namespace}"                  # the topic: {namespace}.{source.table}
"table.include.list" = "{source.table}"
"slot.name" = "dbz_{namespace}"
"publication.name" = "dbz_{namespace}_pub"
"publication.autocreate.mode" = "filtered"
"snapshot.mode" = "no_data"                     # the table starts empty
"topic.creation.default.partitions" = 1
"topic.creation.default.replication.factor" = -1
# Debezium's JDBC sink needs the records' schemas.
"key.converter" = "org.apache.kafka.connect.json.JsonConverter"
"key.converter.schemas.enable" = true
"value.converter" = "org.apache.kafka.connect.json.JsonConverter"
"value.converter.schemas.enable" = true

[[connectors]]
name = "sink"
[connectors.config]
"connector.class" = "io.debezium.connector.jdbc.JdbcSinkConnector"
"tasks.max" = 1
"topics" = "{namespace}.{source.table}"
"connection.url" = "{postgres.jdbc_url}"
"connection.username" = "{postgres.user}"
"connection.password" = "{postgres.password}"
"insert.mode" = "upsert"
"primary.key.mode" = "record_key"
"delete.enabled" = true
"schema.evolution" = "basic"                    # it creates its table with the first record
"collection.name.format" = "{namespace}.items_mirror"
"key.converter" = "org.apache.kafka.connect.json.JsonConverter"
"key.converter.schemas.enable" = true
"value.converter" = "org.apache.kafka.connect.json.JsonConverter"
"value.converter.schemas.enable" = true
"consumer.override.session.timeout.ms" = 10000  # a restarted worker gets its partition soon

# The sink's table, read with SQL (key, value, version of every row).
[stores.mirror]
kind = "mirror"
sql = { query = "SELECT key, value, version FROM {namespace}.items_mirror" }

# Debezium's topic itself, read to its end: the latest record per key, its key and
# value found in the records' JSON (payload: the converters' schemas are on).
[stores.topic]
kind = "mirror"
[stores.topic.kafka]
topic = "{namespace}.{source.table}"
key_field = "payload.key"
value_field = "payload.after.value"      # a delete's after is null: the key is absent
version_field = "payload.after.version"

[[faults]]
kind = "cut"    # the worker cannot reach PostgreSQL (the source connector stalls)
target = "connect->postgres"
at = 2.0
duration = 1.5

[[faults]]
kind = "crash"  # SIGKILL of the Connect worker; started again when the window ends
target = "connect"
at = 6.0
duration = 2.0
"""

_VIEW = f"""\
summary = "Orders and lines written in transactions; my consumer keeps a document per order"
services = ["postgres", "redis"]
recovery = 3.0

# driftlab creates these tables in the run's schema ({{source.schema}}), fills them
# before your processes start (seed: the transactions below, run `rows` times; or
# seed = {{ sql = "seed.sql" }}, a script of yours), then runs the transactions,
# chosen by weight, each in ONE transaction. Placeholders are SQL parameters: {{key}}
# the order, {{customer}} one of c0..c4, {{amount}} a numeric, {{lines}} a count 1-5,
# {{line}} a line 1-5, {{value}} a unique text.
[source]
seed = {{ rows = 100 }}

[source.tables]
orders = "id text PRIMARY KEY, customer text NOT NULL, status text NOT NULL"
lines = \"\"\"order_id text NOT NULL, line int NOT NULL, amount numeric(10,2) NOT NULL,
  PRIMARY KEY (order_id, line)\"\"\"

[[source.transactions]]
name = "new_order"
weight = 3
statements = [
  "DELETE FROM {{source.schema}}.lines WHERE order_id = {{key}}",
  \"\"\"INSERT INTO {{source.schema}}.orders VALUES ({{key}}, {{customer}}, 'new')
     ON CONFLICT (id) DO UPDATE SET customer = EXCLUDED.customer, status = 'new'\"\"\",
  \"\"\"INSERT INTO {{source.schema}}.lines
     SELECT {{key}}, g, {{amount}} FROM generate_series(1, {{lines}}) g\"\"\",
]

[[source.transactions]]
name = "ship"
weight = 2
statements = [
  "UPDATE {{source.schema}}.orders SET status = 'shipped' WHERE id = {{key}}",
  \"\"\"UPDATE {{source.schema}}.lines SET amount = amount + 1
     WHERE order_id = {{key}} AND line = {{line}}\"\"\",
]

[[source.transactions]]
name = "drop_order"  # a delete: the order's document must go
weight = 1
statements = [
  "DELETE FROM {{source.schema}}.lines WHERE order_id = {{key}}",
  "DELETE FROM {{source.schema}}.orders WHERE id = {{key}}",
]

# Your consumer: a snapshot of the tables, then their changes (logical decoding,
# Debezium, ...), into one JSON document per order.
{_process("indexer", "PGDSN REDIS_URL REDIS_PASSWORD PREFIX", "reads the tables, writes documents")}
# kind = "view": per order, the store must hold what the query `view` returns for it
# at the source (no row: no document). driftlab evaluates it inside each transaction,
# so every state an order's document may rightly show is known. Documents compare as
# JSON (numbers as numbers), on the fields `compare` names.
[stores.docs]
kind = "view"
redis = {{ pattern = "{{namespace}}:*" }}
view = \"\"\"SELECT json_build_object('id', o.id, 'status', o.status, 'lines',
          (SELECT coalesce(json_agg(json_build_object('line', l.line, 'amount', l.amount)
                   ORDER BY l.line), '[]') FROM {{source.schema}}.lines l WHERE l.order_id = o.id))
        FROM {{source.schema}}.orders o WHERE o.id = {{key}}\"\"\"
compare = ["status", "lines"]

{_faults("indexer", "indexer->redis")}"""

SHAPES: dict[str, str] = {
    "cdc-cache": _CDC_CACHE,
    "dual-write": _DUAL_WRITE,
    "outbox": _OUTBOX,
    "queue": _QUEUE,
    "connectors": _CONNECTORS,
    "view": _VIEW,
}
"""Shape -> the body of its starting file."""

TAILS: dict[str, str] = {
    # Long enough for both fault windows before the last `recovery` seconds.
    "connectors": _tail(60, 15, "(longer than the sink's restart)", duration=12),
    # The transactions' weights are the mix.
    "view": _tail(mix=""),
}
"""Shapes whose convergence wait is not the default one."""


def starting_file(shape: str, name: str, file: str = "pipeline.toml") -> str:
    """The commented starting file of `shape`, its run named `name`."""
    head = _HEAD.format(shape=shape, name=name, file=file)
    return head + SHAPES[shape] + TAILS.get(shape, _tail())
