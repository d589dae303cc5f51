"""Pipeline files the tests run: the shared ones in tests/pipelines/, and pieces to write
others (a process that repeats one shell line, the workload and convergence sections)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from reference_counts import predicted

from driftlab.harness.app.pipeline import PipelineResult, run_pipeline
from driftlab.harness.history import exitcodes
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.pipeline.observer import Divergence
from driftlab.scenarios.pipeline.spec import load


def looping(line: str, pause: float) -> str:
    """A process's `command` and `ready`, as TOML: a shell that says `started`, then
    runs `line` over and over, `pause` seconds apart."""
    return f"""command = ["bash", "-c", '''
echo started
while true; do
  {line}
  sleep {pause}
done''']
ready = {{ log = "started" }}
"""


def settings(
    *, clients: int, keys: int, rate: int, duration: int, timeout: int, window: int
) -> str:
    """The [workload] and [converge] sections, as TOML."""
    return f"""
[workload]
clients = {clients}
keys = {keys}
rate = {rate}
duration = {duration}

[converge]
timeout = {timeout}
window = {window}
"""


PIPELINES = Path(__file__).resolve().parent / "pipelines"


def pipeline_text(name: str) -> str:
    """The text of tests/pipelines/<name>.toml."""
    return (PIPELINES / f"{name}.toml").read_text()


def run_text(
    tmp_path: Path, stack: Stack, text: str, name: str, seed: int, analyze: bool = True
) -> PipelineResult:
    """Run the pipeline file `text`, written as `name` in `tmp_path`, on `stack`."""
    path = tmp_path / name
    path.write_text(text)
    return run_pipeline(
        load(path), seed=seed, runs_dir=tmp_path / "runs", stack=stack, analyze=analyze
    )


def history(run_dir: RunDir) -> list[dict[str, Any]]:
    """Every event of the run's history, as JSON objects."""
    return [json.loads(line) for f in run_dir.history.glob("*.jsonl") for line in f.open()]


def final_states(events: list[dict[str, Any]], store: str) -> dict[str, Any]:
    """The final value of every key in `store`, by the history's state events."""
    return {e["key"]: e["value"] for e in events if e["type"] == "state" and e["store"] == store}


def assert_passed(out: PipelineResult, fault_windows: int | None = None) -> None:
    """The run finished without error, reproduced what it expected and converged (with
    `fault_windows` faults, all applied without error, when given)."""
    r = out.run
    assert r.error is None and r.exit_code == exitcodes.OK, (r.error, r.counts)
    assert r.verdict == predicted(r.expectations) and not out.not_converged, (
        r.verdict,
        out.not_converged,
    )
    if fault_windows is not None:
        assert r.fault_windows == fault_windows and not r.fault_errors, r.fault_errors


def passed_analysis(out: PipelineResult) -> dict[str, Any]:
    """The analysis (analysis.json) of a run that passed (asserted as assert_passed does)."""
    assert_passed(out)
    return json.loads(out.run.run_dir.analysis.read_text())


def caught(out: PipelineResult, *kinds: str) -> list[dict[str, Any]]:
    """The anomaly rows (of `kinds`, or all) of a run whose verdict found an unexpected
    anomaly; the test fails when it found none."""
    r = out.run
    assert r.exit_code == exitcodes.VERDICT and r.verdict == "unexpected anomaly", r.counts
    rows = pq.read_table(r.run_dir.anomalies).to_pylist()
    return [row for row in rows if not kinds or row["kind"] in kinds]


def lost_by_name(out: PipelineResult, store: str) -> tuple[list[dict[str, Any]], Divergence]:
    """The lost-write rows of a run whose planted bug lost writes on their way to
    `store`, and `store`'s divergence: every row names `store` and its key, and the
    divergence holds exactly the lost keys."""
    lost = caught(out, "lost-write")
    assert lost and all(row["store"] == store and row["key"] for row in lost), lost[:3]
    diverged = [d for d in out.not_converged if d.store == store]
    assert diverged and set(diverged[0].keys) == {row["key"] for row in lost}, diverged
    return lost, diverged[0]
