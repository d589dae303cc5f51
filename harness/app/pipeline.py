"""Running a pipeline file: a Scenario around its Setup, then the runner's one path.

The scenario carries the pipeline's setup as a value (its factory; the setup is
named `pipeline:<name>` but never entered in the registry), the workload, the fault
schedule and the expectations. A pipeline whose stores did not converge after the heal
fails with that reason (exit 1, driftlab.checkers.verdict.decide), whatever the anomaly counts
say: the report names the store, the keys and since when.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import Unpack

from driftlab.harness.app.run import RunOptions, run_scenario
from driftlab.harness.lab.runner.runner import RunResult
from driftlab.harness.lab.scenario import Scenario
from driftlab.scenarios.pipeline.checks import check_commands, check_duration
from driftlab.scenarios.pipeline.observer import Divergence
from driftlab.scenarios.pipeline.setup import SETUP_PREFIX, PipelineSetup
from driftlab.scenarios.pipeline.spec import Pipeline


@dataclass
class PipelineResult:
    """A run of a pipeline file: the runner's result and the stores that did not
    converge."""

    run: RunResult
    scenario: Scenario
    not_converged: list[Divergence] = field(default_factory=list)


def to_scenario(pipeline: Pipeline) -> Scenario:
    """The Scenario a pipeline file stands for, carrying its setup's factory (its view
    stores in `views`, which the history's header repeats)."""
    views = [s.name for s in pipeline.stores if s.kind == "view"]
    return Scenario(
        name=pipeline.name,
        setup=f"{SETUP_PREFIX}{pipeline.name}",
        setup_factory=partial(PipelineSetup, pipeline),
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


def scenario_for(pipeline: Pipeline, duration: float | None = None) -> Scenario:
    """The scenario of `pipeline`, ready to run (with `duration`, faults stretched).
    PipelineError (bad input) before anything starts for a command this machine lacks
    or a duration too short."""
    check_commands(pipeline)
    if duration is not None:
        check_duration(duration)
    sc = to_scenario(pipeline)
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


def run_pipeline(
    pipeline: Pipeline, *, duration: float | None = None, **options: Unpack[RunOptions]
) -> PipelineResult:
    """Run `pipeline` once (for `duration`, default its file's) and judge it, with the
    options of driftlab.harness.app.run.run_scenario; never raises for a failed run."""
    sc = scenario_for(pipeline, duration)
    result = run_scenario(sc, **options)
    assert isinstance(result.setup, PipelineSetup)  # the one sc's factory built
    return PipelineResult(result, sc, result.setup.divergences)
