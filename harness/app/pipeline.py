"""Running a pipeline file: a Scenario around its Setup, then the runner's one path.

The pipeline's setup class is registered under `pipeline:<name>` for the run; the
scenario carries the workload, the fault schedule and the expectations. A pipeline
whose stores did not converge after the heal fails with that reason (exit 1), whatever
the anomaly counts say: the report names the store, the keys and since when.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness import exitcodes
from harness.app.judge import write_report
from harness.app.run import run_scenario
from harness.architectures.registry import SETUPS
from harness.pipeline.observer import Divergence
from harness.pipeline.setup import SETUP_PREFIX, pipeline_setup
from harness.pipeline.spec import Pipeline
from harness.rundir import RunDir, write_json_atomically
from harness.runner.runner import RunResult
from harness.runner.workload_driver import Tick
from harness.services.stack_protocol import ServiceStack
from scenarios.model import Scenario


@dataclass
class PipelineResult:
    """A run of a pipeline file: the runner's result and the stores that did not
    converge."""

    run: RunResult
    scenario: Scenario
    not_converged: list[Divergence] = field(default_factory=list)


def to_scenario(pipeline: Pipeline, setup_name: str) -> Scenario:
    """The Scenario a pipeline file stands for."""
    return Scenario(
        name=pipeline.name,
        setup=setup_name,
        summary=pipeline.summary or f"the pipeline file {pipeline.path.name}",
        setup_params={"pipeline_file": str(pipeline.path)},
        workload=pipeline.workload,
        faults=pipeline.faults,
        expectations=dict(pipeline.expectations),
        quiesce_timeout=pipeline.converge.timeout,
    )


def register(pipeline: Pipeline, duration: float | None = None) -> Scenario:
    """Make the pipeline's setup known to the runner (`pipeline:<name>`) and return its
    scenario (with `duration`, faults stretched); `unregister` when done."""
    setup = pipeline_setup(pipeline)
    SETUPS[setup.name] = setup
    sc = to_scenario(pipeline, setup.name)
    if duration is not None:
        return sc.with_overrides(duration=duration)
    return replace(sc, faults=sc.faults.fitted(sc.workload.duration))


def is_pipeline(scenario: Scenario) -> bool:
    """Whether `scenario` stands for a pipeline file (`register` made it)."""
    return scenario.setup.startswith(SETUP_PREFIX)


def unregister(scenario: Scenario) -> None:
    """Forget the setup `register` made known."""
    SETUPS.pop(scenario.setup, None)


def judge_convergence(result: RunResult, scenario: Scenario) -> list[Divergence]:
    """The stores of the run's pipeline that did not converge; a run with any fails
    (exit 1) with the reason, and logs/run.json says which."""
    setup = SETUPS.get(scenario.setup)
    made = getattr(setup, "made", [])
    divergences: list[Divergence] = made[-1].divergences if made else []
    if divergences and not result.interrupted:
        reason = "not converged: " + "; ".join(d.line() for d in divergences)
        result.error = reason if result.error is None else f"{result.error}; {reason}"
        if result.exit_code == 0:
            result.exit_code = exitcodes.VERDICT
        _note(result.run_dir, divergences, result.error)
        if result.verdict is not None:
            # The report was written before the wait's verdict: it must say why too.
            write_report(RunDir(result.run_dir))
    return divergences


def run_pipeline(
    pipeline: Pipeline,
    *,
    seed: int,
    runs_dir: Path,
    stack: ServiceStack | None = None,
    spark_master: str | None = None,
    analyze: bool = True,
    duration: float | None = None,
    tick: Tick | None = None,
    stop: threading.Event | None = None,
) -> PipelineResult:
    """Run `pipeline` once on the stack and judge it (never raises for a failed run)."""
    sc = register(pipeline, duration)
    try:
        result = run_scenario(
            sc,
            seed=seed,
            runs_dir=runs_dir,
            spark_master=spark_master,
            stack=stack,
            analyze=analyze,
            tick=tick,
            stop=stop,
        )
        return PipelineResult(result, sc, judge_convergence(result, sc))
    finally:
        unregister(sc)


def _note(run_dir: Path, divergences: list[Divergence], error: str) -> None:
    """logs/run.json gains `not_converged` (the stores, keys and since when) and the
    run's error and exit code say so."""
    summary = RunDir(run_dir).summary
    try:
        data = json.loads(summary.read_text())
    except (OSError, ValueError):
        return
    data["not_converged"] = [
        {
            "store": d.store,
            "keys": d.keys[:100],
            "count": len(d.keys),
            "settled": d.settled,
            "since_s": d.since_s,
            "never_held": d.never_held,
        }
        for d in divergences
    ]
    data["error"] = error
    data["exit_code"] = exitcodes.VERDICT if data.get("exit_code") == 0 else data.get("exit_code")
    write_json_atomically(summary, data)
