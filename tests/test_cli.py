"""The command line answers and teaches."""

from typer.testing import CliRunner

from harness.cli import app
from harness.history.schema import SCHEMA_VERSION


def test_version_names_the_schema() -> None:
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0
    assert f"history schema {SCHEMA_VERSION}" in result.stdout


def test_help_lists_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "version" in result.stdout
