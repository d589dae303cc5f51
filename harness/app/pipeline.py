"""Running a pipeline file: a Scenario around its Setup, then the runner's one path.

The pipeline's setup class is registered under `pipeline:<name>` for the run; the
scenario carries the workload, the fault schedule and the expectations. A pipeline
whose stores did not converge after the heal fails with that reason (exit 1,
harness.app.convergence), whatever the anomaly counts say: the report names the store,
the keys and since when.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Unpack

from harness.app.run import RunOptions, run_scenario
from harness.architectures.registry import SETUPS
from harness.pipeline.checks import check_commands, check_duration
from harness.pipeline.observer import Divergence
from harness.pipeline.setup import pipeline_setup
from harness.pipeline.spec import Pipeline
from harness.runner.runner import RunResult
from scenarios.model import Scenario


@dataclass
class PipelineResult:
    """A run of a pipeline file: the runner's result and the stores that did not
    converge."""

    run: RunResult
    scenario: Scenario
    not_converged: list[Divergence] = field(default_factory=list)


def to_scenario(pipeline: Pipeline, setup_name: str) -> Scenario:
    """The Scenario a pipeline file stands for (its view stores in `views`, which the
    history's header repeats)."""
    views = [s.name for s in pipeline.stores if s.kind == "view"]
    return Scenario(
        name=pipeline.name,
        setup=setup_name,
        summary=pipeline.summary or f"the pipeline file {pipeline.path.name}",
        setup_params={
            "pipeline_file": str(pipeline.path),
            **({"views": list(views)} if views else {}),
        },
        workload=pipeline.workload,
        faults=pipeline.faults,
        expectations=dict(pipeline.expectations),
        quiesce_timeout=pipeline.converge.timeout,
    )


def register(pipeline: Pipeline, duration: float | None = None) -> Scenario:
    """Make the pipeline's setup known to the runner (`pipeline:<name>`) and return its
    scenario (with `duration`, faults stretched); `unregister` when done. PipelineError
    (bad input) before anything starts for a command this machine lacks or a duration
    too short."""
    check_commands(pipeline)
    if duration is not None:
        check_duration(duration)
    setup = pipeline_setup(pipeline)
    SETUPS[setup.name] = setup
    sc = to_scenario(pipeline, setup.name)
    if duration is not None:
        return shortened_recovery(sc, duration).with_overrides(duration=duration)
    return replace(sc, faults=sc.faults.fitted(sc.workload.duration))


def shortened_recovery(sc: Scenario, duration: float) -> Scenario:
    """`sc` whose recovery shrinks in proportion for a run shorter than its file's.

    The faults stretch with the duration; a recovery kept whole would leave a run of a
    few seconds (an exploration's candidate) no room for any fault. After the heal the
    convergence wait, not the recovery, gives the stores their time to catch up."""
    factor = duration / sc.workload.duration
    if factor >= 1 or not sc.scale_faults:
        return sc
    return replace(sc, faults=replace(sc.faults, recovery=sc.faults.recovery * factor))


def unregister(scenario: Scenario) -> None:
    """Forget the setup `register` made known."""
    SETUPS.pop(scenario.setup, None)


def run_pipeline(
    pipeline: Pipeline, *, duration: float | None = None, **options: Unpack[RunOptions]
) -> PipelineResult:
    """Run `pipeline` once (for `duration`, default its file's) and judge it, with the
    options of harness.app.run.run_scenario; never raises for a failed run."""
    sc = register(pipeline, duration)
    try:
        result = run_scenario(sc, **options)
        made = getattr(SETUPS.get(sc.setup), "made", [])
        return PipelineResult(result, sc, made[-1].divergences if made else [])
    finally:
        unregister(sc)
