"""`driftlab suite` and `driftlab matrix` over pipeline files, as a nightly job runs a
user's pipelines: one stack for all, the index, and a failure when one of them fails its
expectations or does not converge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_support import pipeline_text
from typer.testing import CliRunner

from driftlab.checkers.verdict import UNEXPECTED
from driftlab.harness.app.matrix import Cell, run_matrix
from driftlab.harness.app.pipeline import scenario_for
from driftlab.harness.app.suite_index import write_matrix_outputs
from driftlab.harness.cli import app
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.pipeline.spec import load

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis"


def test_a_suite_of_pipeline_files(tmp_path: Path, spark: object) -> None:
    files = f"{EXAMPLE / 'pipeline.toml'},{EXAMPLE / 'pipeline-bug.toml'}"
    runs = tmp_path / "runs"
    result = CliRunner().invoke(
        app, ["suite", "--only", files, "--duration", "6s", "--runs-dir", str(runs)]
    )
    assert result.exit_code == 1, result.output
    index = json.loads((runs / "index.json").read_text())
    by_name = {entry["scenario"]: entry for entry in index["runs"]}
    assert set(by_name) == {"pg-to-redis", "pg-to-redis-bug"}  # no claim ran
    assert by_name["pg-to-redis"]["exit_code"] == 0, by_name["pg-to-redis"]
    bug = by_name["pg-to-redis-bug"]
    assert bug["exit_code"] == 1 and bug["verdict"] == "unexpected anomaly"
    assert bug["error"].startswith("not converged: store cache:")
    assert bug["counts"].get("missing", 0) + bug["counts"].get("stale", 0) > 0


def test_a_bad_pipeline_file_stops_the_suite_before_it_starts(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('services = ["postgres"]\n')
    result = CliRunner().invoke(app, ["suite", "--only", str(bad)])
    assert result.exit_code == 2
    assert "stores: is empty" in result.output


def test_matrix_cells_of_a_pipeline_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "matrix",
            "--scenarios",
            str(EXAMPLE / "pipeline.toml"),
            "--schedules",
            "own,none,latency",
            "--seeds",
            "2",
            "--dry-run",
        ],
    )
    assert result.exit_code == 0, result.output
    names = [line.split(" seed ")[0] for line in result.output.splitlines() if " seed " in line]
    assert names == ["pg-to-redis", "pg-to-redis+none", "pg-to-redis+latency"] * 2


def test_a_pipeline_that_does_not_converge_fails_its_matrix_cell(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    # A store that keeps changing: the checkers see it observed, the wait never ends.
    path = tmp_path / "restless.toml"
    path.write_text(pipeline_text("restless"))
    sc = scenario_for(load(path))
    runs = tmp_path / "runs"
    result = run_matrix([Cell(sc, "own", 1)], 600, runs, stack)
    (outcome,) = result.forbidden  # no expectations: the convergence alone fails it
    assert not result.errors and outcome.result.verdict == UNEXPECTED
    assert "not converged: store cache" in outcome.summary()
    assert f"driftlab matrix --scenarios {path} --schedules own --seeds 1-1" in outcome.summary()
    write_matrix_outputs(runs, result, tmp_path / "matrix.xml")
    assert "not converged" in (tmp_path / "matrix.xml").read_text()
