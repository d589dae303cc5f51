"""One exploration of a pipeline file on a stack, as `driftlab explore FILE.toml` and
the pytest plugin's `explore_pipeline` make it: the space and the first candidate
from the file, the runs on the stack, and what the exploration leaves behind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftlab.harness.app.pipeline_search.on_stack import PipelineRuns
from driftlab.harness.app.pipeline_search.record import write_found, write_log
from driftlab.harness.app.pipeline_search.search import Exploration, Explorer, Plan, Step
from driftlab.harness.app.pipeline_search.space import Candidate, Space
from driftlab.scenarios.pipeline.spec import Pipeline


def the_files_own(pipeline: Pipeline, space: Space) -> Candidate:
    """The file's own schedule as the first candidate, stretched to the space's
    workload as `driftlab run --duration` stretches it."""
    own = pipeline.faults
    if space.duration != pipeline.workload.duration:
        own = own.scaled(space.duration / pipeline.workload.duration)
    return Candidate(own.fitted(space.duration).faults, space.duration, "the file's own")


def explore_file(
    pipeline: Pipeline,
    plan: Plan,
    duration: float | None,
    options: dict[str, Any],
    on_step: Callable[[Exploration, Step], None] | None = None,
) -> Exploration:
    """Explore `pipeline` (each workload `duration` seconds, default the file's) with
    `plan`; `options` are run_scenario's past the seed (runs_dir, stack, server, ...)."""
    space = Space.of(pipeline, duration)
    runner = PipelineRuns(pipeline, options)
    start = the_files_own(pipeline, space)
    return Explorer(space, runner, plan, start=start, on_step=on_step).explore()


@dataclass(frozen=True)
class Written:
    """Where an exploration's log and found schedule (None: nothing failed) went."""

    log: Path
    found: Path | None


def write_outputs(
    ex: Exploration, pipeline_file: Path, out: Path, runs_dir: Path, command: str
) -> Written:
    """RUNS_DIR/explore/<file>-<seed>.jsonl, and the minimal schedule as a pipeline
    file at `out` when a schedule failed; OSError when they cannot be written."""
    log = runs_dir / "explore" / f"{pipeline_file.stem}-{ex.plan.seed}.jsonl"
    write_log(log, ex)
    if ex.minimal is None or ex.minimal_trial is None:
        return Written(log, None)
    write_found(ex, pipeline_file, out, command, ex.minimal_trial.seed)
    return Written(log, out)


def found_path(pipeline_file: Path, seed: int) -> Path:
    """Where the found schedule goes by default: beside the file, whose relative paths
    it shares."""
    return pipeline_file.with_name(f"{pipeline_file.stem}.found-{seed}.toml")
