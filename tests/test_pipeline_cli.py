"""`driftlab init` and `driftlab run FILE.toml` on bad input, no stack needed."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from driftlab.harness.cli import app
from driftlab.scenarios.pipeline.spec import load


def test_init_writes_a_file_that_loads_and_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "pipeline.toml"
    runner = CliRunner()
    first = runner.invoke(app, ["init", "--shape", "outbox", str(target)])
    assert first.exit_code == 0, first.output
    assert "wrote" in first.stdout and target.exists()
    assert load(target).processes[0].name == "relay"
    again = runner.invoke(app, ["init", str(target)])
    assert again.exit_code == 2 and "add --force" in again.output
    assert runner.invoke(app, ["init", "--force", str(target)]).exit_code == 0
    assert load(target).name == "pipeline"  # cdc-cache, named after the file
    unknown = runner.invoke(app, ["init", "--shape", "lambda", str(tmp_path / "x.toml")])
    assert (
        unknown.exit_code == 2
        and "use one of: cdc-cache, dual-write, outbox, queue" in unknown.output
    )


def test_run_refuses_a_bad_file_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    target = tmp_path / "pipeline.toml"
    assert runner.invoke(app, ["init", str(target)]).exit_code == 0
    target.write_text(target.read_text().replace('kind = "crash"', 'kind = "explode"'))
    result = runner.invoke(app, ["run", str(target), "--no-analyze"])
    assert result.exit_code == 2
    (line,) = [ln for ln in result.output.splitlines() if ln.strip()]
    assert line.startswith("error: faults[0]:") and "explode" in line
    missing = runner.invoke(app, ["run", str(tmp_path / "absent.toml"), "--no-analyze"])
    assert missing.exit_code == 2 and "cannot be read" in missing.output


def test_run_refuses_options_a_pipeline_file_does_not_take(tmp_path: Path) -> None:
    runner = CliRunner()
    target = tmp_path / "pipeline.toml"
    assert runner.invoke(app, ["init", str(target)]).exit_code == 0
    clients = runner.invoke(app, ["run", str(target), "--clients", "3"])
    assert clients.exit_code == 2 and "in its [workload]" in clients.output


def test_run_refuses_an_image_process_on_the_local_backend(tmp_path: Path) -> None:
    """An `image` process runs only on the docker backend: the local one refuses the
    file before any stack starts, naming the option that runs it; suite and matrix too."""
    runner = CliRunner()
    target = tmp_path / "pipeline.toml"
    assert runner.invoke(app, ["init", str(target)]).exit_code == 0
    text = target.read_text()
    command = next(ln for ln in text.splitlines() if ln.startswith("command = "))
    target.write_text(text.replace(command, 'image = "shop/consumer:1.2"'))
    assert load(target).processes[0].image == "shop/consumer:1.2"
    for args in (
        ["run", str(target), "--no-analyze"],
        ["suite", "--only", str(target)],
        ["matrix", "--scenarios", str(target), "--dry-run"],
    ):
        result = runner.invoke(app, args, env={"COLUMNS": "200"})  # no wrapping
        assert result.exit_code == 2, (args, result.output)
        (line,) = [ln for ln in result.output.splitlines() if ln.strip()]
        assert "processes." in line and "shop/consumer:1.2" in line, line
        assert "add --backend docker" in line, line
