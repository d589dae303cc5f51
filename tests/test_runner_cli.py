"""`driftlab run` and `driftlab suite`: listing, bad input and the summary, without the
stack."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from driftlab.harness.cli import app
from driftlab.harness.cli.common import parse_duration
from driftlab.harness.cli.printing import print_result
from driftlab.harness.lab.runner.runner import RunResult

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


def test_the_summary_says_where_the_lost_went() -> None:
    console = Console(record=True, width=200, highlight=False)
    result = RunResult(Path("runs/x/1"), "cdc-commit-before-apply", 1, verdict="reproduced")
    result.counts = {"lost-write": 3}
    result.lost_where = {
        "lost-write": {"in the log": 3, "not in the log": 0, "unknown": 0},
        "lost-message": {"in the log": 0, "not in the log": 0, "unknown": 2},
    }
    print_result(console, result)
    text = console.export_text()
    assert (
        "lost-write: 3 still in the broker's log (the consumer skipped them), 0 not in it" in text
    )
    assert "lost-message:" not in text  # nothing known of where those went: no line


def test_the_anomalies_line_writes_counts_as_it_writes_chances() -> None:
    console = Console(record=True, width=200, highlight=False)
    result = RunResult(Path("runs/x/1"), "dual-write-race", 7, verdict="reproduced", exit_code=0)
    result.counts = {"stale": 50, "stale-overwrite": 4753}
    result.coverage = {"stale": 160, "stale-overwrite": 15026}
    print_result(console, result)
    text = console.export_text()
    assert "anomalies: stale 50 in 160 chances, stale-overwrite 4,753 in 15,026 chances" in text


def test_a_pipeline_that_forbids_only_says_held_as_its_report_does() -> None:
    console = Console(record=True, width=200, highlight=False)
    result = RunResult(Path("runs/pipeline/1"), "pipeline", 0, verdict="reproduced", exit_code=0)
    result.expectations = {"missing": "absent", "stale": "absent"}
    print_result(console, result)
    assert "verdict: held" in console.export_text()


def test_the_summary_of_an_inconclusive_run_lists_what_was_missing() -> None:
    console = Console(record=True, width=200, highlight=False)
    result = RunResult(Path("runs/x/1"), "bounded-log", 1, verdict="inconclusive", exit_code=3)
    result.inconclusive = ["nothing was delivered: 80 message(s) produced on t", "fault x"]
    result.error = "inconclusive: " + "; ".join(result.inconclusive)
    print_result(console, result)
    text = console.export_text()
    assert "inconclusive, the run did not test its claim; missing:" in text
    assert "    - nothing was delivered: 80 message(s) produced on t\n    - fault x" in text
    assert "error:" not in text


def test_suite_list_gives_each_claim_its_sentence() -> None:
    result = runner.invoke(app, ["suite", "--list"], terminal_width=80)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "Dual write with concurrent clients on hot keys" in text
    # A variant of a claim (its other half) says what it is, not the claim again.
    assert text.count("CDC with an initial snapshot at a known log position") == 1


def test_down_with_nothing_running_is_not_an_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["down", "--dir", str(tmp_path)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "nothing to stop" in result.output


def test_status_with_no_stack_names_the_command_that_starts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    plain = runner.invoke(app, ["status"], terminal_width=200)
    assert plain.exit_code == 3  # not up, as a stopped service: no bad input
    assert "start one with `driftlab up`" in plain.output
    own = runner.invoke(app, ["status", "--dir", "lab"], terminal_width=200)
    assert own.exit_code == 3 and "start one with `driftlab up --dir lab`" in own.output


def test_matrix_says_which_seeds_a_count_means() -> None:
    args = ["matrix", "--scenarios", "C1", "--schedules", "own", "--dry-run"]
    one = runner.invoke(app, [*args, "--seeds", "1"], terminal_width=200)
    assert one.exit_code == 0, one.output
    assert "seed 0" in one.output and "seeds 0," in one.output
    seven = runner.invoke(app, [*args, "--seeds", "7,"], terminal_width=200)
    assert "seed 7" in seven.output and "seeds 7," in seven.output


def test_a_run_stopped_by_its_lab_names_what_failed_and_judges_nothing() -> None:
    console = Console(record=True, width=200, highlight=False)
    result = RunResult(Path("runs/x/1"), "cdc-store-partition", 3, verdict="lab failed")
    result.exit_code = 3
    result.error = "lab failed: toxiproxy died at 4.2 s into the workload"
    print_result(console, result)
    text = console.export_text()
    assert (
        "lab failed, not the system under test:\n    - lab failed: toxiproxy died at 4.2 s" in text
    )
    assert "verdict: lab failed (the system under test was not judged)" in text
    assert "anomalies:" not in text


def test_what_does_not_change_the_verdict_is_said_beside_it(tmp_path: Path) -> None:
    """A reproduced run whose later fault never started: the terminal's summary and a
    failure message (the pytest plugin's, the matrix's) say so under the verdict."""
    import json

    from analysis_outputs import analysis_json

    from driftlab.harness.app.outcome import outcome_of
    from driftlab.harness.history.rundir import RunDir
    from driftlab.scenarios.catalogue.registry import get_scenario

    never = "scheduled fault crash consumer at 7 s never started (the run ended before it)"
    console = Console(record=True, width=200, highlight=False)
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    result = RunResult(run, "cdc-commit-before-apply", 1, verdict="reproduced", exit_code=0)
    result.counts, result.caveats = {"lost-write": 98}, [never]
    print_result(console, result)
    text = console.export_text()
    assert text.index("verdict: reproduced") < text.index(f"note: {never}")
    analysis = analysis_json(verdict="reproduced", counts={"lost-write": 98}, caveats=[never])
    run.analysis.write_text(json.dumps(analysis))
    summary = outcome_of(result, get_scenario("C4")).summary()
    assert f"  note: {never}" in summary.splitlines()


def test_the_suites_table_is_followed_by_each_runs_caveats() -> None:
    from driftlab.harness.cli.suite import _table
    from driftlab.scenarios.catalogue.registry import get_scenario

    slipped = "fault crash consumer slipped: planned for 0.5 s, it lasted 4.0 s (3.5 s more)"
    console = Console(record=True, width=200, highlight=False)
    result = RunResult(Path("runs/x/1"), "cdc-commit-before-apply", 3, verdict="reproduced")
    result.caveats = [slipped]
    quiet = RunResult(Path("runs/x/2"), "cdc-consumer-crash", 3, verdict="reproduced")
    _table(console, [get_scenario("C4"), get_scenario("C3")], [result, quiet], 60.0)
    text = console.export_text()
    assert f"cdc-commit-before-apply:\n  note: {slipped}" in text
    assert "cdc-consumer-crash:" not in text
