"""Running a candidate schedule for real: the pipeline file with the candidate's faults
and workload length, through `run_pipeline` (the path of `driftlab run`), on the
stack of the exploration, and what the run folder says it showed."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from itertools import combinations
from pathlib import Path
from typing import Any, Unpack

import pyarrow as pa
import pyarrow.compute as pc

from driftlab.checkers.verdict import LAB_FAILED
from driftlab.harness.app.outcome import outcome_of
from driftlab.harness.app.pipeline import PipelineResult, run_pipeline
from driftlab.harness.app.pipeline_search.space import Candidate
from driftlab.harness.app.pipeline_search.trial import Trial
from driftlab.harness.app.run import RunOptions
from driftlab.harness.history import exitcodes
from driftlab.harness.history.errors import HistoryError
from driftlab.harness.history.reader import load_history
from driftlab.harness.history.schema import Mark
from driftlab.harness.lab.nemesis.schedule import FaultSpec
from driftlab.scenarios.pipeline.spec import Pipeline


def with_candidate(pipeline: Pipeline, cand: Candidate) -> Pipeline:
    """`pipeline` with the candidate's faults and workload duration."""
    return replace(
        pipeline,
        faults=cand.schedule(pipeline.faults.recovery),
        workload=replace(pipeline.workload, duration=cand.duration),
    )


@dataclass
class PipelineRuns:
    """Runs candidates of `pipeline` with `options` (runs folder, stack, warm Spark)."""

    pipeline: Pipeline
    options: dict[str, Any]

    def __call__(self, cand: Candidate, seed: int) -> Trial:
        """One run of `cand`; KeyboardInterrupt when the run was interrupted."""
        opts: RunOptions = {**self.options, "seed": seed}  # type: ignore[typeddict-item]
        return run_candidate(self.pipeline, cand, **opts)


def run_candidate(pipeline: Pipeline, cand: Candidate, **options: Unpack[RunOptions]) -> Trial:
    """Run `pipeline` once under `cand` and tell what the run showed."""
    out = run_pipeline(with_candidate(pipeline, cand), **options)
    if out.run.exit_code == exitcodes.INTERRUPTED:
        raise KeyboardInterrupt
    return trial_of(out, cand)


def trial_of(out: PipelineResult, cand: Candidate) -> Trial:
    """The Trial of a finished run of `cand`, from its result and run folder."""
    r = out.run
    outcome = outcome_of(r, out.scenario)
    stores = outcome.analysis.lag if outcome.analysis else {}
    lag = {store: v.max_ms / 1000 for store, v in stores.items()}
    opened, windows = _fault_times(r.run_dir.path, cand.faults)
    failed = r.exit_code == exitcodes.VERDICT
    note = r.error or "; ".join(r.reasons or r.inconclusive)
    return Trial(
        failed=failed,
        # An inconclusive run (a fault whose moment never came) is no failure of the lab.
        lab_failed=not failed and r.verdict in (None, LAB_FAILED),
        verdict=r.verdict,
        forbidden=dict(outcome.forbidden),
        kinds={**outcome.found, **outcome.forbidden},
        lag_s=lag,
        overlaps=_overlaps(windows),
        opened_at=opened,
        run_dir=r.run_dir.path,
        report=outcome.report,
        seed=r.seed,
        wall_s=r.wall_s,
        note=note,
    )


def _fault_times(
    run_dir: Path, faults: tuple[FaultSpec, ...]
) -> tuple[tuple[float | None, ...], list[tuple[str, float, float]]]:
    """When each fault of the schedule opened (seconds after the workload's start;
    None: never), matched by kind, target and moment in the order they opened, and
    every window as (target, opened, closed)."""
    try:
        table = load_history(run_dir)
    except HistoryError:
        return tuple(None for _ in faults), []
    rows = table.filter(pc.is_in(table["type"], value_set=pa.array(["fault", "mark"]))).to_pylist()
    start = next((r["time"] for r in rows if r.get("kind") == Mark.WORKLOAD_START), None)
    if start is None:
        return tuple(None for _ in faults), []
    opens: dict[str, tuple[dict[str, Any], float]] = {}
    closes: dict[str, float] = {}
    for r in rows:
        if r["type"] != "fault":
            continue
        t = (r["time"] - start) / 1e9
        if r["phase"] == "start":
            opens[r["fault_id"]] = (r, t)
        else:
            closes[r["fault_id"]] = t
    windows = [(row["target"], t, closes.get(fid, t)) for fid, (row, t) in opens.items()]
    unclaimed = sorted(opens.values(), key=lambda rt: rt[1])
    opened: list[float | None] = []
    for f in faults:
        after = f.after.describe() if f.after is not None else None
        hit = next(
            (
                rt
                for rt in unclaimed
                if rt[0]["kind"] == f.kind
                and rt[0]["target"] == f.target
                and json.loads(rt[0].get("extra") or "{}").get("after") == after
            ),
            None,
        )
        if hit is not None:
            unclaimed.remove(hit)
        opened.append(None if hit is None else round(hit[1], 3))
    return tuple(opened), windows


def _overlaps(windows: list[tuple[str, float, float]]) -> frozenset[str]:
    """`a+b` (sorted) for every two windows on targets a and b open at once."""
    return frozenset(
        "+".join(sorted((a[0], b[0])))
        for a, b in combinations(windows, 2)
        if a[1] < b[2] and b[1] < a[2]
    )
