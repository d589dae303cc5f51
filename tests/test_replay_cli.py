"""`driftlab replay` refuses bad input with the problem and the fix, before any run."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from harness.explore.schedule import Schedule, Step


def test_replay_refuses_a_file_that_is_not_a_schedule(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    result = CliRunner().invoke(app, ["replay", str(bad), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2
    assert "not a schedule" in " ".join(result.output.split())
    assert not (tmp_path / "runs").exists()


def test_replay_refuses_a_setup_without_a_replay(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    Schedule("event-sourced", [Step("deposit", "c1", "a1", "1"), Step("quiesce")]).save(path)
    result = CliRunner().invoke(app, ["replay", str(path), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "has no replay yet" in said and "dual-write" in said
    assert not (tmp_path / "runs").exists()
