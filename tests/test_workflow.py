"""The nightly chaos workflow: actionlint accepts it, and every driftlab command line it
runs parses with the real CLI and plans real cells (`--dry-run`, nothing started)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from driftlab.harness.cli import app

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly-chaos.yml"
ACTIONLINT = ROOT / "vendor" / "bin" / "actionlint"


@pytest.fixture(scope="module")
def workflow() -> dict[Any, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def _steps(workflow: dict[Any, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def _driftlab_lines(workflow: dict[Any, Any]) -> list[str]:
    lines = []
    for step in _steps(workflow):
        run = " ".join(step.get("run", "").split())
        lines += [m.group(0) for m in re.finditer(r"\S*driftlab \S.*", run)]
    return lines


def test_actionlint_accepts_the_workflow() -> None:
    assert ACTIONLINT.exists(), "vendor/bin/actionlint is missing: run scripts/bootstrap"
    out = subprocess.run(
        [str(ACTIONLINT), "-no-color", str(WORKFLOW)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_actionlint_rejects_a_broken_workflow(tmp_path: Path) -> None:
    # The linter really reads what it is given: an unknown key and a bad expression.
    broken = (
        WORKFLOW.read_text()
        .replace("runs-on:", "runs_on:")
        .replace("${{ github.run_id }}", "${{ github.nope( }}")
    )
    path = tmp_path / "broken.yml"
    path.write_text(broken)
    out = subprocess.run(
        [str(ACTIONLINT), "-no-color", str(path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0
    assert "runs_on" in out.stdout


def test_it_runs_on_a_schedule_and_by_hand_and_installs_with_bootstrap(
    workflow: dict[Any, Any],
) -> None:
    # PyYAML reads the key `on` as the boolean True (YAML 1.1).
    triggers = workflow.get("on", workflow.get(True))
    assert triggers["schedule"][0]["cron"]
    assert "workflow_dispatch" in triggers
    runs = [step.get("run", "") for step in _steps(workflow)]
    assert any("scripts/bootstrap" in r for r in runs)
    uploads = [
        s for s in _steps(workflow) if s.get("uses", "").startswith("actions/upload-artifact")
    ]
    paths = "\n".join(s["with"]["path"] for s in uploads)
    assert all(s.get("if") == "always()" for s in uploads)
    assert "runs/" in paths and "runs/index.html" in paths and "report.html" in paths


def test_its_driftlab_command_lines_parse_with_the_real_cli(
    workflow: dict[Any, Any], tmp_path: Path
) -> None:
    lines = _driftlab_lines(workflow)
    assert any(" matrix " in line for line in lines), lines
    # $BUDGET and $SEEDS as a scheduled run sees them: the inputs' defaults.
    inputs = workflow.get("on", workflow.get(True))["workflow_dispatch"]["inputs"]
    values = {"BUDGET": inputs["budget"]["default"], "SEEDS": inputs["seeds"]["default"]}
    runner = CliRunner()
    for line in lines:
        argv = [values.get(a[1:], a) if a.startswith("$") else a for a in shlex.split(line)]
        assert Path(argv[0]).name == "driftlab", argv
        if argv[1] != "matrix":
            # up, run, explore: no dry run; each option is one the command takes.
            usage = runner.invoke(app, [argv[1], "--help"], terminal_width=200).output
            assert all(a in usage for a in argv[2:] if a.startswith("--")), (line, usage)
            continue
        args = [*argv[1:], "--dry-run"]
        args[args.index("--runs-dir") + 1] = str(tmp_path / "runs")
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (line, result.output)
        assert re.search(r"^\d+ cells, seeds \d+(, \d+)*, budget 1200 s$", result.output, re.M), (
            result.output
        )
        assert not (tmp_path / "runs").exists()  # a dry run starts nothing, writes nothing
