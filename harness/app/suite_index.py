"""The pages a suite or a matrix leaves in the runs folder: runs/index.json and the
suite page runs/index.html (one entry per run), and for a matrix runs/matrix.json and
its JUnit report."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from driftlab.checkers.verdict import UNEXPECTED
from driftlab.harness.history import exitcodes
from driftlab.harness.history.rundir import RunsDir, write_json_atomically
from driftlab.harness.lab.runner.runner import RunResult
from driftlab.harness.lab.scenario import Scenario
from driftlab.reports.suite_page import render_index

if TYPE_CHECKING:
    from driftlab.harness.app.matrix import Cell, MatrixResult


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


def write_matrix_outputs(runs_dir: Path, result: MatrixResult, junit: Path | None) -> Path:
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


def _write_matrix_json(runs_dir: Path, result: MatrixResult) -> None:
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


def junit_xml(result: MatrixResult) -> bytes:
    """A JUnit XML report: one testcase per cell (classname the scenario, name the
    schedule and seed); a forbidden anomaly is a <failure> whose message is the
    outcome's headline and forbidden kinds, its text the full summary; a run that
    could not complete is an <error>; a cell the budget left out is <skipped>."""
    suite = ET.Element("testsuite", name="driftlab matrix")
    failures = errors = 0
    for cell, outcome in result.outcomes:
        case = _case(cell, outcome.result.wall_s)
        r = outcome.result
        if r.verdict == UNEXPECTED:
            failures += 1
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(outcome.forbidden.items()))
            failure = ET.SubElement(
                case, "failure", message=f"{outcome.headline()}: {kinds}", type=UNEXPECTED
            )
            failure.text = outcome.summary()
        elif r.error or r.exit_code == exitcodes.INTERRUPTED:
            errors += 1
            error = ET.SubElement(case, "error", message=r.error or "interrupted", type="run error")
            error.text = outcome.summary()
        else:
            out = ET.SubElement(case, "system-out")
            out.text = outcome.summary()
        suite.append(case)
    for cell, outcome in result.cut:
        case = _case(cell, outcome.result.wall_s)
        skipped = ET.SubElement(case, "skipped", message="cut at the deadline of the budget")
        skipped.text = f"run folder: {outcome.result.run_dir}"
        suite.append(case)
    for cell in result.skipped:
        case = _case(cell, 0.0)
        ET.SubElement(case, "skipped", message="left out: the time budget was spent")
        suite.append(case)
    total = len(result.outcomes) + len(result.cut) + len(result.skipped)
    suite.set("tests", str(total))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(len(result.cut) + len(result.skipped)))
    suite.set("time", f"{result.wall_s:.1f}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _case(cell: Cell, seconds: float) -> ET.Element:
    return ET.Element(
        "testcase",
        classname=f"driftlab.{cell.scenario.name.split('+', 1)[0]}",
        name=f"{cell.schedule} seed {cell.seed}",
        time=f"{seconds:.1f}",
    )
