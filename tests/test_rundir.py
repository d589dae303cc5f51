"""RunDir owns the run folder: absolute paths from creation, `latest`, and no other
module spells a file name of it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from driftlab.harness.history import rundir
from driftlab.harness.history.rundir import RunDir, RunsDir

ROOT = Path(__file__).resolve().parent.parent


def test_a_run_folder_made_from_a_relative_runs_folder_is_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run = RunDir.create(Path("runs"), "C1", 7)
    assert run.path.is_absolute() and run.config.is_absolute()
    assert run.path.parent == tmp_path / "runs" / "C1"
    assert run.path.name.endswith("-7") and run.run_id == f"C1/{run.path.name}"
    assert run.history.is_dir() and run.logs.is_dir()
    assert run.runs == RunsDir(tmp_path / "runs")
    latest = tmp_path / "runs" / "latest"
    assert latest.resolve() == run.path
    assert not os.readlink(latest).startswith("/"), "latest must stay relative"
    monkeypatch.chdir("/")  # a child process in another folder still finds it
    assert run.history.is_dir()


def test_two_runs_within_a_second_get_two_folders_and_latest_follows(tmp_path: Path) -> None:
    first = RunDir.create(tmp_path, "C1", 1)
    second = RunDir.create(tmp_path, "C1", 1)
    assert first.path != second.path
    assert (tmp_path / "latest").resolve() == second.path


def test_config_is_written_whole_and_read_back(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "C3", 2)
    run.write_config({"scenario": "C3", "seed": 2, "when": Path("x")})
    assert run.read_config() == {"scenario": "C3", "seed": 2, "when": "x"}
    assert [p.name for p in run.path.iterdir() if p.suffix == ".tmp"] == []
    assert RunDir(tmp_path / "nothing").read_config() == {}


def test_a_dangling_latest_is_dropped(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "jepsen", 0)
    run.history.rmdir()
    run.logs.rmdir()
    run.path.rmdir()
    run.runs.drop_dangling_latest()
    assert not (tmp_path / "latest").is_symlink()


def test_no_module_spells_a_run_folder_file_name() -> None:
    names = [
        rundir.CONFIG_JSON,
        *rundir.ANALYSIS_OUTPUTS,
        rundir.REPORT_HTML,
        rundir.REPLAY_JSON,
        rundir.SUMMARY_JSON,
        rundir.RUNNER_LOG,
        rundir.ANALYZE_LOG,
        rundir.INDEX_JSON,
        rundir.MATRIX_JSON,
    ]
    literal = re.compile("|".join(rf"([\"']){re.escape(n)}\{i + 1}" for i, n in enumerate(names)))
    offenders = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for folder in ("harness", "checkers", "reports", "scenarios", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if path != ROOT / "harness" / "history" / "rundir.py"
        for m in literal.finditer(path.read_text())
    ]
    assert offenders == []
