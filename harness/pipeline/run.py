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

from harness.architectures.registry import SETUPS
from harness.pipeline.observer import Divergence
from harness.pipeline.setup import PipelineSetup, pipeline_setup
from harness.pipeline.spec import Pipeline
from harness.runner.runner import EXIT_VERDICT, RunResult, run_scenario
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
    base = pipeline_setup(pipeline)
    made: list[PipelineSetup] = []

    class Tracked(base):  # type: ignore[valid-type,misc]
        """The pipeline's setup, remembered so its convergence can be read back."""

        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    SETUPS[base.name] = Tracked
    try:
        sc = to_scenario(pipeline, base.name)
        if duration is not None:
            sc = sc.with_overrides(duration=duration)
        else:
            sc = replace(sc, faults=sc.faults.fitted(sc.workload.duration))
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
    finally:
        SETUPS.pop(base.name, None)
    out = PipelineResult(result, sc, made[0].divergences if made else [])
    if out.not_converged and not result.interrupted:
        reason = "not converged: " + "; ".join(d.line() for d in out.not_converged)
        result.error = reason if result.error is None else f"{result.error}; {reason}"
        if result.exit_code == 0:
            result.exit_code = EXIT_VERDICT
        _note(result.run_dir, out.not_converged)
    return out


def _note(run_dir: Path, divergences: list[Divergence]) -> None:
    """logs/run.json gains `not_converged`: the stores, keys and since when."""
    summary = run_dir / "logs" / "run.json"
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
        }
        for d in divergences
    ]
    data["exit_code"] = EXIT_VERDICT if data.get("exit_code") == 0 else data.get("exit_code")
    summary.write_text(json.dumps(data, indent=2) + "\n")
