"""A pipeline file with the user's own SQL (source statements, a store read by a query)
and the convergence wait on the real stack: a sync job that converges after its crash,
and one that never stops changing its store, whose run fails saying so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_support import pipeline_text

from driftlab.checkers.verdict import UNEXPECTED
from driftlab.harness.app.pipeline import PipelineResult, run_pipeline
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.pipeline.spec import load

pytestmark = [pytest.mark.services, pytest.mark.slow]


def run(tmp_path: Path, stack: Stack, text: str) -> PipelineResult:
    path = tmp_path / "pipeline.toml"
    path.write_text(text)
    return run_pipeline(load(path), seed=2, runs_dir=tmp_path / "runs", stack=stack, analyze=False)


def test_own_sql_source_and_store_converge_after_a_crash(stack: Stack, tmp_path: Path) -> None:
    out = run(tmp_path, stack, pipeline_text("own_sql"))
    r = out.run
    assert r.error is None and r.exit_code == exitcodes.OK, r.error
    assert out.not_converged == []
    assert r.fault_windows == 1 and not r.fault_errors
    events = [json.loads(line) for f in r.run_dir.history.glob("*.jsonl") for line in f.open()]
    oks = [e for e in events if e["type"] == "op" and e["phase"] == "ok" and e["f"] == "write"]
    # The user's RETURNING rev is the version of every write.
    assert oks and all(isinstance(e.get("version"), int) for e in oks)
    state = {
        (e["store"], e["key"]): (e["value"], e.get("version"))
        for e in events
        if e["type"] == "state" and e.get("key")
    }
    source = {k: v for (store, k), v in state.items() if store == "source"}
    copy = {k: v for (store, k), v in state.items() if store == "copy"}
    assert len(source) == 6 and copy == source


def test_a_store_that_never_settles_fails_the_run(stack: Stack, tmp_path: Path) -> None:
    out = run(tmp_path, stack, pipeline_text("restless"))
    r = out.run
    (div,) = out.not_converged
    assert div.store == "cache" and "k0" in div.keys and not div.settled
    # Not analysed, the run is still judged on its facts, by the verdict's one function.
    assert r.exit_code == exitcodes.VERDICT and r.verdict == UNEXPECTED
    assert r.reasons == [f"not converged: {div.line()}"] and r.error == r.reasons[0]
    assert "still changing when the wait ended" in r.error


def test_a_store_never_seen_holding_a_key_says_to_check_its_reader(
    stack: Stack, tmp_path: Path
) -> None:
    out = run(tmp_path, stack, pipeline_text("idle"))
    (div,) = out.not_converged
    assert div.never_held and div.settled and div.keys == ["k0", "k1", "k2"]
    assert "no key was ever seen in it: check how [stores.cache] reads it" in out.run.error
    summary = json.loads(out.run.run_dir.summary.read_text())
    assert summary["error"] == out.run.error and summary["exit_code"] == exitcodes.VERDICT
    assert summary["not_converged"][0]["never_held"] is True
