"""Example 2 of docs/pipelines.md on the real stack: a pipeline made only of
configuration. Debezium's PostgreSQL source and Debezium's JDBC sink, given as their
JSON configs in the pipeline file, copy the source table into a second table through
Kafka while the fault schedule cuts the Connect worker off from PostgreSQL, then
SIGKILLs it mid-run. The correct
configuration passes; the copy whose source connector skips updates is caught by
`stale` rows naming the keys, and by the convergence wait."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import pytest
from pipeline_support import assert_passed, final_states, history

from driftlab.harness.app.pipeline import run_pipeline
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.pipeline.observer import OBSERVER
from driftlab.scenarios.pipeline.spec import load

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pg_to_pg_jdbc"


def test_the_connectors_copy_the_table_through_a_connect_crash(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    out = run_pipeline(load(EXAMPLE / "pipeline.toml"), seed=2, runs_dir=tmp_path, stack=stack)
    r = out.run
    assert_passed(out, fault_windows=2)
    events = history(r.run_dir)
    crashes = [e for e in events if e["type"] == "fault" and e.get("kind") == "crash"]
    assert {(e["target"], e["phase"]) for e in crashes} == {
        ("connect", "start"),
        ("connect", "stop"),
    }
    seen = [e for e in events if e["type"] == "op" and e.get("process") == OBSERVER]
    assert seen and all(e["store"] == "mirror" for e in seen)
    finals = final_states(events, "mirror")
    source = final_states(events, "source")
    assert finals == source and len(source) > 20
    # The run cleaned up after itself: no connector, slot or publication of its own left.
    connect = stack["connect"]
    assert not [n for n in connect.rest("GET", "/connectors") if n.startswith("dl_pg_to_pg")]
    with psycopg.connect(stack["postgres"].conninfo(), autocommit=True) as conn:
        slots = conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
        pubs = conn.execute("SELECT pubname FROM pg_publication").fetchall()
    assert not [s for (s,) in slots + pubs if "pg_to_pg_jdbc" in s]


def test_a_source_skipping_updates_is_caught_with_its_keys(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    bad = run_pipeline(load(EXAMPLE / "pipeline-bug.toml"), seed=2, runs_dir=tmp_path, stack=stack)
    b = bad.run
    assert b.exit_code == exitcodes.VERDICT and b.verdict == "unexpected anomaly", (
        b.verdict,
        b.counts,
    )
    assert b.counts.get("stale", 0) > 0, b.counts
    rows = pq.read_table(b.run_dir.anomalies).to_pylist()
    stale = [row for row in rows if row["kind"] == "stale"]
    keys = {row["key"] for row in stale}
    assert len(keys) == b.counts["stale"] and all(k.startswith("k") for k in keys)
    assert all(json.loads(row["evidence"]) for row in stale)
    # The convergence wait names the same keys of the same store.
    (div,) = bad.not_converged
    assert div.store == "mirror" and div.settled and set(div.keys) == keys


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        # Connect's own validation refuses it (tasks.max is an int).
        (("tasks.max", "zero"), "Connect refused its config"),
        # Valid for Connect; the JDBC sink's task fails as it reads its config.
        (("insert.mode", "upsertt"), "its task failed as it started"),
    ],
)
def test_a_config_that_cannot_run_is_named_and_leaves_nothing(
    stack: Stack, spark: object, tmp_path: Path, setting: tuple[str, str], named: str
) -> None:
    # The run says so in one line (exit 2: the file is wrong) and removes the source
    # connector it had already registered, with its replication slot.
    text = (EXAMPLE / "pipeline.toml").read_text()
    sink = json.loads((EXAMPLE / "sink.json").read_text())
    sink["config"][setting[0]] = setting[1]
    (tmp_path / "sink.json").write_text(json.dumps(sink))
    (tmp_path / "source.json").write_text((EXAMPLE / "source.json").read_text())
    (tmp_path / "p.toml").write_text(text.replace('name = "pg-to-pg-jdbc"', 'name = "refused"'))
    out = run_pipeline(load(tmp_path / "p.toml"), seed=1, runs_dir=tmp_path, stack=stack)
    r = out.run
    assert r.exit_code == exitcodes.BAD_INPUT, (r.exit_code, r.error)
    assert named in str(r.error) and "_sink" in str(r.error) and "\n" not in str(r.error)
    if setting[0] == "tasks.max":
        assert "tasks.max" in str(r.error)
    assert not [n for n in stack["connect"].rest("GET", "/connectors") if "refused" in n]
    with psycopg.connect(stack["postgres"].conninfo(), autocommit=True) as conn:
        slots = conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
    assert not [s for (s,) in slots if "refused" in s]


def test_a_sink_task_that_fails_mid_run_is_the_pipelines_outcome_not_the_labs(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    # The file's connectors are the user's: a sink task that fails on the first record
    # the workload sends is the pipeline failing. The run says so where the mirror did
    # not converge (exit 1), naming the task and its trace; the lab did not fail.
    sink = json.loads((EXAMPLE / "sink.json").read_text())
    sink["config"] |= {
        "transforms": "broken",
        "transforms.broken.type": "org.apache.kafka.connect.transforms.ValueToKey",
        "transforms.broken.fields": "no_such_field",
    }
    (tmp_path / "sink.json").write_text(json.dumps(sink))
    (tmp_path / "source.json").write_text((EXAMPLE / "source.json").read_text())
    text = (EXAMPLE / "pipeline.toml").read_text().replace('"pg-to-pg-jdbc"', '"sink-fails"')
    (tmp_path / "p.toml").write_text(text.replace("timeout = 60", "timeout = 20"))
    out = run_pipeline(load(tmp_path / "p.toml"), seed=1, runs_dir=tmp_path, stack=stack)
    r = out.run
    assert r.exit_code == exitcodes.VERDICT, (r.exit_code, r.error)
    assert r.verdict != "lab failed"
    (div,) = out.not_converged
    assert div.store == "mirror" and div.causes, div
    assert "task 0 of connector dl_sink_fails" in div.causes[0] and "FAILED (" in div.causes[0]
    assert "FAILED" in str(r.error) and "not converged" in str(r.error)
    summary = json.loads(r.run_dir.summary.read_text())
    assert not summary.get("lab_failures"), summary.get("lab_failures")
