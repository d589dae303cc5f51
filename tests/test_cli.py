"""The command line answers and teaches."""

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from driftlab.harness.cli import app
from driftlab.harness.history.schema import SCHEMA_VERSION


def test_version_names_the_schema() -> None:
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0
    assert f"history schema {SCHEMA_VERSION}" in result.stdout


def test_help_lists_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "version" in result.stdout


def _prose(help_text: str) -> list[list[str]]:
    """The paragraphs of a command's description: the lines between its usage line and
    its first panel, split at blank lines."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next((i for i, line in enumerate(lines) if "╭" in line), len(lines))
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:end]:
        if line.strip():
            paragraphs[-1].append(line.rstrip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def test_every_help_reflows_its_paragraphs_at_80_columns() -> None:
    # Rich kept a docstring's own line breaks and wrapped again around them: lines of
    # one word ("local", "status:") in the middle of `driftlab up --help`.
    commands = sorted(c.name or c.callback.__name__ for c in app.registered_commands)
    ragged = {}
    for name in commands:
        result = CliRunner().invoke(app, [name, "--help"], terminal_width=80, env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        for paragraph in _prose(result.output):
            indent = len(paragraph[0]) - len(paragraph[0].lstrip())
            if any(len(line) - len(line.lstrip()) > indent for line in paragraph[1:]):
                continue  # an example, laid out by hand
            short = [line.strip() for line in paragraph[:-1] if len(line.strip()) < 55]
            if short:
                ragged[name] = short
    assert ragged == {}


_LEFT_BEHIND = """
import atexit, sys, threading, time
from pathlib import Path
from driftlab.harness.cli import main
from driftlab.harness.lab.runner.workload_driver import CLIENTS_LEFT
if sys.argv[1] == "left":
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
    CLIENTS_LEFT.set()
atexit.register(Path(sys.argv[2]).write_text, "ran")
sys.argv = ["driftlab", *sys.argv[3:]]
print("before", end="")  # no newline: only a flush writes it
main()
"""


@pytest.mark.parametrize("argv", [["version"], ["run", "no-such-scenario"]])
def test_a_command_that_left_clients_in_a_call_ends_as_it_would_have(
    tmp_path: Path, argv: list[str]
) -> None:
    # Once a run left clients inside librdkafka calls, the interpreter's finalization
    # freed their producers under them (SIGSEGV after the verdict): such a command ends
    # without it, and must still say everything, run its exit handlers, and keep its code.
    ended = {}
    for mode in ("left", "normal"):
        handled = tmp_path / f"{mode}-handled"
        ended[mode] = subprocess.run(
            [sys.executable, "-c", _LEFT_BEHIND, mode, str(handled), *argv],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert handled.read_text() == "ran"
    left, normal = ended["left"], ended["normal"]
    assert (left.returncode, left.stdout, left.stderr) == (
        normal.returncode, normal.stdout, normal.stderr,
    )  # fmt: skip
    assert left.stdout.startswith("before")
