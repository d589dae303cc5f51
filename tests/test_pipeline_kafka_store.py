"""A Kafka topic as a derived store, read from outside: a relay of the user's sends an
outbox table to a topic, and driftlab reads the topic to its end as a mirror (the
latest version per key) and as a log (every write must arrive). The lag per store comes
from the observer's sightings; a relay that drops writes loses them by name, one that
sends an old version again after newer ones is a stale overwrite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_support import (
    PIPELINES,
    caught,
    history,
    lost_by_name,
    passed_analysis,
    run_text,
    settings,
)

from driftlab.harness.app.pipeline import PipelineResult
from driftlab.harness.lab.services.stack import Stack

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

RELAY = """
name = "kafka-relay-VARIANT"
services = ["postgres", "kafka"]

[source]
create = \"\"\"
CREATE TABLE {source.table} (key text PRIMARY KEY, value text, version bigint NOT NULL);
CREATE TABLE {namespace}.pending (id bigserial PRIMARY KEY, key text, value text, version bigint)
\"\"\"
write = \"\"\"
WITH w AS (
  INSERT INTO {source.table} AS t (key, value, version) VALUES ({key}, {value}, 1)
  ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = t.version + 1
  RETURNING key, value, version),
p AS (INSERT INTO {namespace}.pending (key, value, version) SELECT * FROM w)
SELECT version FROM w
\"\"\"
read = "SELECT key, value, version FROM {source.table}"

[processes.relay]
command = ["{python}", "RELAY_PY"]
ready = { log = "relay ready" }

[processes.relay.env]
DSN = "{postgres.dsn}"
BOOTSTRAP = "{kafka.bootstrap}"
KAFKA_SECURITY_PROTOCOL = "{kafka.security_protocol}"
KAFKA_SASL_MECHANISM = "{kafka.sasl_mechanism}"
KAFKA_USERNAME = "{kafka.username}"
KAFKA_PASSWORD = "{kafka.password}"
TOPIC = "{namespace}.items"
PENDING = "{namespace}.pending"
BUG = "VARIANT"

[stores.mirror.kafka]
topic = "{namespace}.items"
value_field = "after.value"
version_field = "after.version"

[stores.log]
kind = "log"
kafka = { topic = "{namespace}.items", value_field = "after.value" }

[[faults]]
kind = "crash"
target = "relay"
at = 1.0
duration = 1.0

[expect]
EXPECT
"""

SETTINGS = settings(clients=2, keys=5, rate=40, duration=5, timeout=15, window=3)


def run(tmp_path: Path, stack: Stack, variant: str, expect: str) -> PipelineResult:
    text = (
        RELAY.replace("VARIANT", variant)
        .replace("RELAY_PY", str(PIPELINES / "kafka_relay.py"))
        .replace("EXPECT", expect)
    )
    return run_text(tmp_path, stack, text + SETTINGS, f"{variant or 'good'}.toml", seed=3)


def test_a_topic_read_as_mirror_and_log_with_lag_per_store(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    absent = '["missing", "stale", "phantom", "extra", "lost-write", "stale-overwrite"]'
    out = run(tmp_path, stack, "", f"absent = {absent}")
    analysis = passed_analysis(out)
    # Every write reached both stores; their lag comes from driftlab's sightings.
    lag = analysis["lag"]
    assert set(lag) == {"mirror", "log"}, lag
    for store in ("mirror", "log"):
        assert lag[store]["count"] > 0
        assert 0 <= lag[store]["p50_ms"] <= lag[store]["p99_ms"] <= lag[store]["max_ms"]
    # A log has every write: as many lag samples as writes arrived. A mirror sampled
    # every 200 ms sees only some versions, each counted once.
    assert lag["mirror"]["count"] <= lag["log"]["count"]
    # The mirror's versions were seen: stale-overwrite had chances to be found.
    assert analysis["coverage"]["stale-overwrite"] > 0, analysis["coverage"]
    # The observer's reads are driftlab's, not the workload's: no client op is a read.
    series = json.loads(out.run.run_dir.series.read_text())
    assert {row["f"] for row in series["ops"]} == {"write"}, series["ops"][:3]


def test_a_relay_that_drops_writes_loses_them_by_name(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    out = run(tmp_path, stack, "drop", 'absent = ["lost-write"]')
    lost, log_div = lost_by_name(out, "log")
    assert all(json.loads(row["evidence"])[0]["value"].endswith("7") for row in lost)
    # "differing since" is on the report's clock: from the history's first event.
    events = history(out.run.run_dir)
    t0 = min(e["time"] for e in events)
    last = {
        e["key"]: e["time"]
        for e in sorted(events, key=lambda e: e["time"])
        if e["type"] == "op" and e.get("store") == "source" and e["phase"] == "ok"
    }
    since = min(last[k] for k in log_div.keys)
    assert log_div.since_s is not None
    assert abs(log_div.since_s - (since - t0) / 1e9) < 0.05, (log_div.since_s, since - t0)


def test_a_relay_that_resends_old_versions_overwrites_stale(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    out = run(tmp_path, stack, "resend", 'absent = ["stale-overwrite", "lost-write"]')
    rows = caught(out)
    stale = [row for row in rows if row["kind"] == "stale-overwrite"]
    assert stale and {row["store"] for row in stale} == {"mirror"}
    for row in stale:
        newer, older = json.loads(row["evidence"])
        # Both are driftlab's sightings of the mirror: the older version seen last.
        assert newer["process"] == older["process"] == "observer"
        assert newer["version"] > older["version"] and older["version"] % 4 == 0, row
    assert not any(row["kind"] == "lost-write" for row in rows)
