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
# {{kafka.bootstrap}}, {{rabbitmq.url}}, {{source.table}}, ... Write {{{{ for a brace.
name = "{name}"
"""

_TAIL = """
[workload]
clients = 4
keys = 8          # keys k0..k7 written by the workload
rate = 100        # writes per second, all clients together
duration = 10     # seconds
rotate_s = 1.0    # every second the writes move on to fresh keys, which keep their value

[expect]
# Kinds of anomaly that fail the run (docs/checkers.md). A mirror that converges
# never misses a key nor keeps an old, invented or deleted value.
absent = ["missing", "stale", "phantom", "extra"]

[converge]
timeout = 30  # after the faults heal, how long your stores may take to equal the source
window = 3    # a store unchanged this long has settled (converged or not)
"""

_CDC_CACHE = """\
summary = "A consumer of my own mirrors a PostgreSQL table into Redis"
services = ["postgres", "redis"]
recovery = 3.0  # seconds at the end of the workload kept free of faults

# driftlab creates <namespace>.items(key text, value text, version bigint) and writes
# it: every write bumps the key's version.
[source]
table = "items"

# Your consumer: a command line (any language), its environment, and how driftlab
# knows it is ready (ready = {{ log = "..." }}, {{ tcp = 8080 }} or {{ http = "http://..." }}).
# It reaches each service through a link of its own (here mirror->postgres and
# mirror->redis), which the faults below can cut.
[processes.mirror]
command = ["./my-consumer"]
ready = {{ log = "ready" }}

[processes.mirror.env]  # templated per run
PGDSN = "{{postgres.dsn}}"
REDIS_URL = "{{redis.url}}"
TABLE = "{{source.table}}"
PREFIX = "{{namespace}}:"

# What your consumer derives, and how driftlab reads it. kind = "mirror": the latest
# value of each key (skipped intermediate versions are no loss).
[stores.cache]
kind = "mirror"
redis = {{ pattern = "{{namespace}}:*" }}  # add field = "value" if each key is a hash

[[faults]]
kind = "crash"    # SIGKILL of the process group; restarted when the window ends
target = "mirror"
at = 2.0
duration = 1.5

[[faults]]
kind = "cut"      # the consumer's link to Redis stops passing bytes
target = "mirror->redis"
at = 5.0
duration = 1.5
"""

_OUTBOX = """\
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
read = "SELECT key, value, version FROM {{source.table}} WHERE value IS NOT NULL"

[processes.relay]   # reads the outbox, publishes to Kafka
command = ["./my-relay"]
ready = {{ log = "ready" }}

[processes.relay.env]  # templated per run
PGDSN = "{{postgres.dsn}}"
BOOTSTRAP = "{{kafka.bootstrap}}"
OUTBOX = "{{namespace}}.outbox"
TOPIC = "{{namespace}}"

[processes.consumer]   # reads Kafka, writes Redis
command = ["./my-consumer"]
ready = {{ log = "ready" }}

[processes.consumer.env]  # templated per run
BOOTSTRAP = "{{kafka.bootstrap}}"
TOPIC = "{{namespace}}"
REDIS_URL = "{{redis.url}}"
PREFIX = "{{namespace}}:"

[stores.cache]
kind = "mirror"
redis = {{ pattern = "{{namespace}}:*" }}

[[faults]]
kind = "crash"
target = "relay"
at = 2.0
duration = 1.5

[[faults]]
kind = "cut"
target = "consumer->kafka"
at = 5.0
duration = 1.5
"""

_QUEUE = """\
summary = "A publisher and a queue worker of my own carry a PostgreSQL table to a second table"
services = ["postgres", "rabbitmq"]
recovery = 3.0

# Your DDL runs before your processes start; with it, driftlab's table is yours to
# create too (key, value, version).
[source]
table = "items"
create = \"\"\"
CREATE TABLE {{source.table}} (key text PRIMARY KEY, value text, version bigint NOT NULL);
CREATE TABLE {{namespace}}.derived (key text PRIMARY KEY, value text, version bigint)
\"\"\"

[processes.publisher]   # notices source changes, publishes them to a queue
command = ["./my-publisher"]
ready = {{ log = "ready" }}

[processes.publisher.env]  # templated per run
PGDSN = "{{postgres.dsn}}"
AMQP_URL = "{{rabbitmq.url}}"
TABLE = "{{source.table}}"
QUEUE = "{{namespace}}"

[processes.worker]      # consumes the queue, writes the derived table
command = ["./my-worker"]
ready = {{ log = "ready" }}

[processes.worker.env]  # templated per run
AMQP_URL = "{{rabbitmq.url}}"
QUEUE = "{{namespace}}"
PGDSN = "{{postgres.dsn}}"
TARGET = "{{namespace}}.derived"

# A store read with SQL: key, value and optionally version of every row.
[stores.derived]
kind = "mirror"
sql = {{ query = "SELECT key, value, version FROM {{namespace}}.derived" }}

[[faults]]
kind = "crash"
target = "worker"
at = 2.0
duration = 1.5

[[faults]]
kind = "cut"
target = "worker->rabbitmq"
at = 5.0
duration = 1.5
"""

_DUAL_WRITE = """\
summary = "My web application writes its database, then its cache"
services = ["postgres", "redis"]
recovery = 3.0

# Your application writes the source: driftlab sends each write as an HTTP request
# with the JSON body {{"key": ..., "value": ...}} (a "version" in the JSON answer is the
# write's), creates the table first and reads the truth back with SQL.
[source]
create = "CREATE TABLE {{source.table}} (key text PRIMARY KEY, value text, version bigint NOT NULL)"
http = "PUT http://127.0.0.1:{{app_server.port}}/items/{{key}}"
read = "SELECT key, value, version FROM {{source.table}} WHERE value IS NOT NULL"

# {{app_server.port}} is a free port driftlab draws for this process, kept across restarts.
[processes.app_server]
command = ["./my-app"]
ready = {{ http = "http://127.0.0.1:{{app_server.port}}/health" }}

[processes.app_server.env]  # templated per run
PGDSN = "{{postgres.dsn}}"
REDIS_URL = "{{redis.url}}"
TABLE = "{{source.table}}"
PREFIX = "{{namespace}}:"
PORT = "{{app_server.port}}"

[stores.cache]
kind = "mirror"
redis = {{ pattern = "{{namespace}}:*", field = "value" }}

[[faults]]
kind = "crash"    # between (or during) the application's two writes
target = "app_server"
at = 2.0
duration = 1.0

[[faults]]
kind = "cut"
target = "app_server->redis"
at = 5.0
duration = 1.5
"""

SHAPES: dict[str, str] = {
    "cdc-cache": _CDC_CACHE,
    "dual-write": _DUAL_WRITE,
    "outbox": _OUTBOX,
    "queue": _QUEUE,
}
"""Shape -> the body of its starting file."""


def starting_file(shape: str, name: str, file: str = "pipeline.toml") -> str:
    """The commented starting file of `shape`, its run named `name`."""
    return _HEAD.format(shape=shape, name=name, file=file) + SHAPES[shape].format() + _TAIL
