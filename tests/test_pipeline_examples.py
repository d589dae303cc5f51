"""Example 1 of docs/pipelines.md on the real stack: a shell consumer (psql and
redis-cli over logical decoding) mirrors a PostgreSQL table into Redis while the
fault schedule crashes it twice and cuts it off from Redis. The correct consumer
passes; the copy with a planted bug (a restart skips to the end of the WAL) is caught
by forbidden kinds whose rows name the keys, and by the convergence wait; that run goes
through the pytest plugin's `run_scenario` fixture, as a user's own suite would."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pipeline_support import assert_passed, final_states, history

from driftlab.harness.app.outcome import Outcome
from driftlab.harness.app.pipeline import run_pipeline
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.pipeline.observer import NOT_CONVERGED, OBSERVER
from driftlab.scenarios.pipeline.spec import load

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis"


def test_the_correct_mirror_passes(stack: Stack, spark: object, tmp_path: Path) -> None:
    out = run_pipeline(load(EXAMPLE / "pipeline.toml"), seed=3, runs_dir=tmp_path, stack=stack)
    r = out.run
    assert_passed(out, fault_windows=3)
    events = history(r.run_dir)
    crashes = [e for e in events if e["type"] == "fault" and e.get("kind") == "crash"]
    assert {e["phase"] for e in crashes} == {"start", "stop"}
    # Black-box observations: the observer's reads of the cache, with the values seen.
    seen = [
        e
        for e in events
        if e["type"] == "op" and e.get("process") == OBSERVER and e["phase"] == "ok"
    ]
    assert seen and all(e["store"] == "cache" for e in seen)
    finals = final_states(events, "cache")
    source = final_states(events, "source")
    assert finals == source and len(source) > 20
    # The consumer was restarted by the faults: three instances wrote the log.
    assert r.run_dir.log("mirror.log").read_text().count("mirror ready") == 3


def test_the_planted_bug_is_caught_with_its_keys(
    run_scenario: Callable[..., Outcome], spark: object
) -> None:
    # Through the pytest plugin's fixture, as a user's own test suite runs a file.
    outcome = run_scenario(EXAMPLE / "pipeline-bug.toml", seed=3)
    r = outcome.result
    assert not outcome.passed
    assert r.exit_code == exitcodes.VERDICT and r.verdict == "unexpected anomaly", (
        r.verdict,
        r.counts,
    )
    caught = {k: n for k, n in outcome.forbidden.items() if k in ("missing", "stale")}
    assert caught, outcome.summary()
    rows = pq.read_table(r.run_dir.anomalies).to_pylist()
    keys = {row["key"] for row in rows if row["kind"] in caught}
    assert len(keys) == sum(caught.values()) and all(k.startswith("k") for k in keys)
    assert all(json.loads(row["evidence"]) for row in rows if row["kind"] in caught)
    # The convergence wait says the same: which store, which keys, since when.
    summary = json.loads(r.run_dir.summary.read_text())
    (div,) = summary["not_converged"]
    assert div["store"] == "cache" and div["settled"] and set(div["keys"]) == keys
    assert div["since_s"] is not None and div["since_s"] > 0
    marks = [e for e in history(r.run_dir) if e["type"] == "mark" and e["kind"] == NOT_CONVERGED]
    assert len(marks) == 1 and json.loads(str(marks[0]["extra"]))["count"] == len(keys)
    report = r.run_dir.report.read_text()
    assert "Run error: not converged: store cache:" in report
    # The failing test's message: the reason, one example naming a key, the command.
    text = outcome.summary()
    assert "run failed: not converged: store cache:" in text
    assert "forbidden anomaly missing" in text or "forbidden anomaly stale" in text
    assert f"reproduce with: driftlab run {EXAMPLE / 'pipeline-bug.toml'} --seed 3" in text


HTTP_APP = EXAMPLE.parent / "http_dual_write"


def test_a_web_apps_dual_write_passes_and_its_planted_bugs_are_caught(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    # Example 3: the workload writes through the application's HTTP endpoint; the
    # application is crashed (requests refused or cut mid-answer) and cut off from Redis.
    good = run_pipeline(load(HTTP_APP / "pipeline.toml"), seed=4, runs_dir=tmp_path, stack=stack)
    r = good.run
    assert r.error is None and r.exit_code == exitcodes.OK, (r.error, r.counts)
    phases = [
        e["phase"]
        for e in history(r.run_dir)
        if e["type"] == "op" and e.get("process") != OBSERVER and e["f"] == "write"
    ]
    assert phases.count("ok") > 500 and "fail" in phases  # refused while it was down
    oks = [
        e
        for e in history(r.run_dir)
        if e["type"] == "op" and e["phase"] == "ok" and e.get("store") == "source"
    ]
    assert all(isinstance(e.get("version"), int) for e in oks)  # the app's answer
    bad = run_pipeline(load(HTTP_APP / "pipeline-bug.toml"), seed=4, runs_dir=tmp_path, stack=stack)
    b = bad.run
    assert b.exit_code == exitcodes.VERDICT and b.verdict == "unexpected anomaly", b.counts
    assert b.counts.get("stale", 0) + b.counts.get("missing", 0) > 0, b.counts
    rows = pq.read_table(b.run_dir.anomalies).to_pylist()
    keys = {row["key"] for row in rows if row["kind"] in ("stale", "missing")}
    (div,) = bad.not_converged
    assert set(div.keys) == keys
