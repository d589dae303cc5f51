"""`driftlab explore pipeline.toml` on the real stack, with examples/catch_up: its
consumer loses a batch only when it crashes while it catches up after a restart, which
the file's own clock schedule misses. The exploration (a fixed search seed, short
workloads) finds it, shrinks it to at most two faults failing at least 2 of 3 runs, and
writes a pipeline file that fails again under `driftlab run`; on the correct consumer
the same exploration finds nothing and says how many schedules it tried. The pytest
plugin's `explore_pipeline` explores within a budget too."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lab_support import stack_folder, up
from typer.testing import CliRunner

from driftlab.harness.app.pipeline_search.search import Exploration
from driftlab.harness.cli import app
from driftlab.harness.history import exitcodes
from driftlab.scenarios.pipeline.spec import load

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "catch_up"
SEED = 3


@pytest.fixture(scope="module")
def stack_dir() -> Iterator[Path]:
    """A stack of `driftlab up --dir`, stopped at the end: the explorations crash its
    Redis, which another process then restarts (the session's Stack would not know)."""
    with stack_folder() as root:
        up(root, "postgres,redis")
        yield root


def _explore(stack: Path, tmp_path: Path, name: str, *budget: str) -> tuple[Path, str, int]:
    """Explore a copy of examples/catch_up/<name>.toml on the stack in `stack`; the
    copy's folder, the output and the exit status."""
    folder = tmp_path / "catch_up"
    shutil.copytree(EXAMPLE, folder)
    argv = [
        "explore",
        str(folder / f"{name}.toml"),
        "--seed",
        str(SEED),
        "--duration",
        "6s",
        *budget,
        "--stack-dir",
        str(stack),
        "--runs-dir",
        str(tmp_path / "runs"),
    ]
    result = CliRunner().invoke(app, argv)
    return folder, result.output, result.exit_code


def _log(tmp_path: Path, name: str) -> list[dict[str, object]]:
    path = tmp_path / "runs" / "explore" / f"{name}-{SEED}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_explore_finds_the_catch_up_bug_and_shrinks_it(
    stack_dir: Path, spark: object, tmp_path: Path
) -> None:
    folder, output, code = _explore(
        stack_dir, tmp_path, "pipeline-bug", "--budget", "8m", "--shrink-runs", "10"
    )
    assert code == exitcodes.VERDICT, output
    *runs, result = _log(tmp_path, "pipeline-bug")
    # The file's own schedule (the first run) holds: the bug hides in a moment.
    assert runs[0]["origin"] == "the file's own" and not runs[0]["failed"]
    fails, tries = result["rate"]  # type: ignore[misc]
    assert tries == 3 and fails >= 2, result
    assert result["first_failure"] <= result["minimal_at"] <= result["runs"] == len(runs)
    summary = output.strip().splitlines()[-1]
    assert summary.startswith("driftlab explore pipeline-bug: FAILED:"), output
    assert f"fail {fails} of 3 runs" in summary
    found = folder / f"pipeline-bug.found-{SEED}.toml"
    text = found.read_text()
    faults = load(found).faults.faults
    assert 1 <= len(faults) <= 2, text
    # A crash of the consumer while it recovers from a crash or restart of its own.
    assert [f.target for f in faults][-1] == "consumer", text
    assert f"--seed {SEED}" in text and "Replay: driftlab run" in text
    replay_seed = re.search(r"Replay: driftlab run \S+ --seed (\d+)", text)
    assert replay_seed is not None
    # The file replays under `driftlab run`: it fails again, 2 of at most 3 runs.
    replays = []
    for _ in range(3):
        run = CliRunner().invoke(
            app,
            [
                "run",
                str(found),
                "--seed",
                replay_seed.group(1),
                "--stack-dir",
                str(stack_dir),
                "--runs-dir",
                str(tmp_path / "replays"),
            ],
        )
        assert run.exit_code in (exitcodes.OK, exitcodes.VERDICT), run.output
        replays.append(run.exit_code == exitcodes.VERDICT)
        if sum(replays) == 2 or len(replays) - sum(replays) == 2:
            break
    assert sum(replays) >= 2, replays


def test_explore_finds_nothing_in_the_correct_consumer_and_says_how_much_it_tried(
    stack_dir: Path, spark: object, tmp_path: Path
) -> None:
    folder, output, code = _explore(stack_dir, tmp_path, "pipeline", "--runs", "8")
    assert code == exitcodes.OK, output
    summary = output.strip().splitlines()[-1]
    assert summary.startswith("driftlab explore pipeline: nothing failed in 8 schedule(s)")
    runs = _log(tmp_path, "pipeline")[:-1]
    assert len(runs) == 8 and not any(r["failed"] for r in runs)
    # Schedules at moments were tried, not only clock times.
    assert any("after" in f for r in runs for f in r["faults"])  # type: ignore[attr-defined]
    assert not list(folder.glob("*.found-*.toml"))


def test_the_pytest_plugin_explores_a_file_within_a_budget(
    explore_pipeline: Callable[..., Exploration], spark: object, tmp_path: Path
) -> None:
    folder = tmp_path / "catch_up"
    shutil.copytree(EXAMPLE, folder)
    ex = explore_pipeline(folder / "pipeline.toml", seed=SEED, runs=3, duration="6s")
    assert ex.exit_code == exitcodes.OK and ex.runs == ex.schedules == 3, ex.best()
    assert ex.steps[0].candidate.origin == "the file's own"
    assert all(s.trial.run_dir is not None and s.trial.run_dir.exists() for s in ex.steps)
