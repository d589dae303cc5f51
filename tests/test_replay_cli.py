"""`driftlab replay` refuses bad input with the problem and the fix, before any run."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from driftlab.harness.cli import app
from driftlab.harness.lab.explore.schedule import Schedule, Step
from driftlab.scenarios.catalogue.architectures import REPLAY_DRIVERS, SIMULATED_SETUPS


def test_replay_refuses_a_file_that_is_not_a_schedule(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    result = CliRunner().invoke(app, ["replay", str(bad), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2
    assert "not a schedule" in " ".join(result.output.split())
    assert not (tmp_path / "runs").exists()


def _refused(tmp_path: Path, schedule: Schedule) -> str:
    """Replay `schedule` through the CLI; assert it is refused before any run."""
    path = tmp_path / "s.json"
    schedule.save(path)
    result = CliRunner().invoke(app, ["replay", str(path), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2
    assert not (tmp_path / "runs").exists()
    return " ".join(result.output.split())


def test_every_simulated_setup_has_a_replay_driver() -> None:
    assert set(REPLAY_DRIVERS) == set(SIMULATED_SETUPS)


def test_replay_refuses_a_setup_the_simulator_does_not_know(tmp_path: Path) -> None:
    said = _refused(tmp_path, Schedule("dual-writes", [Step("quiesce")]))
    assert "'dual-writes' is not one `driftlab explore` simulates" in said
    assert "dual-write," in said


def test_replay_refuses_a_step_the_setup_never_takes(tmp_path: Path) -> None:
    steps = [Step("db-write", "c1", "k1", "c1-1"), Step("poll", "w3"), Step("quiesce")]
    said = _refused(tmp_path, Schedule("amqp", steps))
    assert "step 2 (consumer w3 receives the next message) is no move of amqp" in said
    assert "poll (w1, w2)" in said
