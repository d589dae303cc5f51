"""`driftlab run` and `driftlab suite`: listing and bad input, without the stack."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.run import parse_duration

runner = CliRunner()


def test_suite_list_names_the_claims() -> None:
    result = runner.invoke(app, ["suite", "--list"], terminal_width=200)
    assert result.exit_code == 0
    for text in ("C1", "C2", "C13", "dual-write-race", "dual-write-sequential"):
        assert text in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "no-such-scenario"], "driftlab suite --list"),
        (["suite", "--only", "C1,C99"], "C99"),
        (["run", "C1", "--duration", "soon"], "not a duration"),
    ],
)
def test_bad_input_exits_2_with_the_fix(args: list[str], message: str) -> None:
    result = runner.invoke(app, args, terminal_width=200)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_durations() -> None:
    assert parse_duration("90") == 90
    assert parse_duration("1.5m") == 90
    assert parse_duration("250ms") == 0.25
    with pytest.raises(typer.BadParameter):
        parse_duration("0s")
