"""`driftlab suite` over pipeline files, as a nightly job runs a user's pipelines: one
stack for all, the index, and exit 1 when one of them fails its expectations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app

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
