"""What an exploration leaves behind: a line per run in its log, the found schedule as
a pipeline file, and the one-line summary a CI log shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from driftlab.harness.app.pipeline_search.found_file import found_text
from driftlab.harness.app.pipeline_search.search import Exploration, Step
from driftlab.harness.app.pipeline_search.space import fault_mapping


def step_record(step: Step) -> dict[str, Any]:
    """One run of the exploration as a JSON object: why, which schedule, what it showed."""
    t, c = step.trial, step.candidate
    return {
        "run": step.index,
        "phase": step.phase,
        "origin": c.origin,
        "schedule": c.describe(),
        "faults": [fault_mapping(f) for f in c.faults],
        "duration": c.duration,
        "seed": t.seed,
        "failed": t.failed,
        "lab_failed": t.lab_failed,
        "verdict": t.verdict,
        "forbidden": t.forbidden,
        "anomalies": t.kinds,
        "lag_s": t.lag_s,
        "opened_at": list(t.opened_at),
        "new": list(step.new),
        "run_dir": str(t.run_dir) if t.run_dir else None,
        "wall_s": round(t.wall_s, 2),
        "note": t.note,
    }


def write_log(path: Path, ex: Exploration) -> None:
    """explore.jsonl: one line per run, then one with the exploration's result."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(step_record(s)) for s in ex.steps]
    result = {
        "result": summary(ex, "", None),
        "seed": ex.plan.seed,
        "runs": ex.runs,
        "schedules": ex.schedules,
        "first_failure": ex.first_failure,
        "minimal_at": ex.minimal_at,
        "rate": list(ex.minimal_rate),
        "stopped": ex.stopped,
        "shrink_note": ex.shrink_note,
        "wall_s": round(ex.wall_s, 1),
    }
    path.write_text("\n".join([*lines, json.dumps(result)]) + "\n")


def write_found(
    ex: Exploration, pipeline_file: Path, out: Path, command: str, replay_seed: int
) -> None:
    """The minimal schedule as a pipeline file at `out`: `pipeline_file` with its faults
    replaced, what was found in a comment at the top."""
    assert ex.minimal is not None
    fails, tries = ex.minimal_rate
    t = ex.minimal_trial
    comments = [
        f"Found by: {command}",
        f"It failed {fails} of {tries} runs; the first failure was run {ex.first_failure}, "
        f"this schedule run {ex.minimal_at} of {ex.runs}.",
        f"Schedule: {ex.minimal.describe()}",
    ]
    if t is not None and t.run_dir is not None:
        comments.append(f"A failing run: {t.run_dir}")
    comments.append(f"Replay: driftlab run {out} --seed {replay_seed}")
    out.write_text(found_text(pipeline_file.read_text(), ex.minimal, comments))


def summary(ex: Exploration, name: str, out: Path | None) -> str:
    """One line for a CI log: what failed and how often, or how much was tried."""
    head = f"driftlab explore {name}: " if name else ""
    took = f"{ex.runs} runs, {ex.wall_s:.0f} s, seed {ex.plan.seed}"
    if ex.minimal is not None:
        fails, tries = ex.minimal_rate
        n = len(ex.minimal.faults)
        written = f"; written to {out}" if out is not None else ""
        return (
            f"{head}FAILED: {n} fault(s) fail {fails} of {tries} runs (first failure at run "
            f"{ex.first_failure}, this schedule at run {ex.minimal_at}; {took}): "
            f"{ex.minimal.describe()}{written}"
        )
    if ex.stopped == "lab":
        last = ex.steps[-1].trial.note if ex.steps else ""
        return f"{head}the lab failed in the last runs ({took}): {last}"
    return f"{head}nothing failed in {ex.schedules} schedule(s) ({took})"
