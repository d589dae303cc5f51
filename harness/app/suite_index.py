"""The pages a suite or a matrix leaves in the runs folder: runs/index.json and the
suite page runs/index.html (one entry per run), and for a matrix runs/matrix.json and
its JUnit report."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.app.matrix import junit_xml
from harness.rundir import RunsDir, write_json_atomically
from harness.runner.runner import RunResult
from reports.suite_page import render_index
from scenarios.model import Scenario


def write_index(
    runs_dir: Path,
    chosen: list[Scenario],
    results: list[RunResult],
    wall: float,
    written_by: str = "suite",
) -> Path:
    """runs/index.json (one entry per claim run; `written_by` the command, suite or
    matrix, whose wall time it holds), then the suite page runs/index.html; returns the
    page's path."""
    by_name = {sc.name: sc for sc in chosen}
    entries = []
    for r in results:
        sc = by_name[r.scenario]
        entries.append(
            {
                "claim": sc.claim,
                "scenario": sc.name,
                "summary": sc.summary,
                "setup": sc.setup,
                "run_dir": str(r.run_dir.path.relative_to(runs_dir)),
                "seed": r.seed,
                "expectations": sc.expectations,
                "verdict": r.verdict,
                "counts": r.counts,
                "error": r.error,
                "exit_code": r.exit_code,
                "ops": r.stats.ops,
                "ops_per_s": round(r.stats.rate, 1),
                "wall_s": round(r.wall_s, 1),
            }
        )
    runs_dir.mkdir(parents=True, exist_ok=True)
    path = write_json_atomically(
        RunsDir(runs_dir).index_json,
        {
            "schema": 1,
            "generated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "written_by": written_by,
            "wall_s": round(wall, 1),
            "runs": entries,
        },
    )
    return Path(render_index(path))


def write_matrix_outputs(runs_dir: Path, result: Any, junit: Path | None) -> Path:
    """runs/index.json and the suite page (every run of the matrix), runs/matrix.json
    and the JUnit report; returns the suite page's path."""
    chosen = {c.scenario.name: c.scenario for c, _ in result.outcomes}
    runs = [o.result for _, o in result.outcomes]
    index = write_index(runs_dir, list(chosen.values()), runs, result.wall_s, "matrix")
    _write_matrix_json(runs_dir, result)
    if junit is not None:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_bytes(junit_xml(result))
    return index


def _write_matrix_json(runs_dir: Path, result: Any) -> None:
    """runs/matrix.json: every cell run (with its verdict and folder) and skipped."""
    data = {
        "schema": 1,
        "generated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": round(result.wall_s, 1),
        "runs": [
            {
                "scenario": cell.scenario.name,
                "schedule": cell.schedule,
                "seed": cell.seed,
                "verdict": o.result.verdict,
                "forbidden": o.forbidden,
                "error": o.result.error,
                "run_dir": str(o.result.run_dir.path.relative_to(runs_dir)),
                "wall_s": round(o.result.wall_s, 1),
            }
            for cell, o in result.outcomes
        ],
        "cut": [
            {
                "scenario": cell.scenario.name,
                "schedule": cell.schedule,
                "seed": cell.seed,
                "run_dir": str(o.result.run_dir.path.relative_to(runs_dir)),
                "wall_s": round(o.result.wall_s, 1),
            }
            for cell, o in result.cut
        ],
        "skipped": [
            {"scenario": c.scenario.name, "schedule": c.schedule, "seed": c.seed}
            for c in result.skipped
        ],
    }
    write_json_atomically(RunsDir(runs_dir).matrix_json, data)
