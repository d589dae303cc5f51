"""One default stack per user, whatever the current folder
(driftlab.harness.lab.services.stack_home),
and the commands that name the stack they would use."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from cli_support import DRIFTLAB

from driftlab.harness.lab.services.stack_home import ENV, ROOT_STACK_DIR, default_stack_dir


def test_the_setting_names_the_stack_wherever_the_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "lab/stack")
    monkeypatch.chdir(tmp_path)
    assert default_stack_dir() == tmp_path / "lab" / "stack"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    # Made absolute when read: a relative setting is the folder it named then.
    assert default_stack_dir() == elsewhere / "lab" / "stack"
    monkeypatch.setenv(ENV, str(tmp_path / "lab"))
    assert default_stack_dir() == tmp_path / "lab"


def test_without_the_setting_the_stack_is_the_users_not_the_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    first = default_stack_dir()
    monkeypatch.chdir(tmp_path)
    assert default_stack_dir() == first
    if os.geteuid() == 0:
        assert first == ROOT_STACK_DIR
    else:
        assert first == tmp_path / "state" / "driftlab" / "stack"
        monkeypatch.setenv("XDG_STATE_HOME", "relative")  # ignored, as the spec says
        assert default_stack_dir() == Path.home() / ".local/state/driftlab/stack"


def test_roots_stack_is_where_postgres_can_enter() -> None:
    # PostgreSQL runs as an unprivileged account when the harness is root: every
    # existing parent of root's stack must let others through (/root does not).
    for parent in ROOT_STACK_DIR.parents:
        if parent.exists():
            assert parent.stat().st_mode & stat.S_IXOTH, parent


def _driftlab(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ENV: str(home), "COLUMNS": "200"}
    return subprocess.run(
        [DRIFTLAB, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("command", ["run", "suite", "matrix", "analyze"])
def test_every_running_command_takes_a_stack(command: str, tmp_path: Path) -> None:
    args = {"run": ["C1"], "suite": ["--only", "C1"], "matrix": [], "analyze": [str(tmp_path)]}
    (tmp_path / "config.json").write_text("{}")
    empty = tmp_path / "no-stack"
    done = _driftlab(
        tmp_path / "home", tmp_path, command, *args[command], "--stack-dir", str(empty)
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"no stack in {empty}" in done.stderr
    assert f"start one with `driftlab up --dir {empty}`" in done.stderr


def test_status_and_down_name_the_users_stack_from_any_folder(tmp_path: Path) -> None:
    home = tmp_path / "home" / "stack"
    status = _driftlab(home, tmp_path, "status")
    # Not up (3, as a stopped service), one line; `down` has nothing to stop (0).
    assert status.returncode == 3 and status.stderr == ""
    # The user's default folder: a plain `driftlab up` starts it.
    assert status.stdout.strip() == (
        f"no stack in {home} (no stack.json); start one with `driftlab up`"
    )
    down = _driftlab(home, tmp_path, "down")
    assert down.returncode == 0 and f"no stack in {home}" in down.stdout
