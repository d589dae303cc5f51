"""analysis.json and examples.json through their typed model: what a reader of a file
that no analysis of this driftlab wrote is told (one line: the file and the fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_outputs import analysis_json, examples_json
from typer.testing import CliRunner

from driftlab.checkers.analysis_files import OutputFileError, read_analysis, read_examples
from driftlab.checkers.analyze import AnalysisInputError, analyze
from driftlab.harness.app.outcome import outcome_of
from driftlab.harness.cli import app
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.runner.runner import RunResult
from driftlab.reports.suite_page import evidence_line, scan_runs
from driftlab.scenarios.catalogue.registry import get_scenario


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "pipeline" / "20260101T000000Z-0"
    (run / "logs").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"scenario": "pipeline", "seed": 0}))
    return run


def _report(run: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["report", str(run)])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda a: "{not json", "is not readable JSON"),
        (lambda a: json.dumps(a | {"schema": 0}), "has schema 0, this driftlab reads schema 1"),
        (
            lambda a: json.dumps({k: v for k, v in a.items() if k != "verdict"}),
            "verdict: field required",
        ),
        (lambda a: json.dumps(a | {"counts": {"stale": "many"}}), "counts.stale: input should be"),
        (
            lambda a: json.dumps(a | {"verdicts": "held"}),
            "verdicts: extra inputs are not permitted",
        ),
    ],
)
def test_an_analysis_no_analysis_wrote_is_one_line_with_the_fix(
    tmp_path: Path, change, said: str
) -> None:
    run = _run(tmp_path)
    path = run / "analysis.json"
    path.write_text(change(analysis_json(verdict="held")))
    with pytest.raises(OutputFileError) as caught:
        read_analysis(path)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(str(path)) and said in line
    assert line.endswith(f"re-run `driftlab analyze {run}`")
    code, output = _report(run)
    assert code == 2 and said in output and "driftlab analyze" in output
    assert "Traceback" not in output
    # The suite page lists the run as not analysed, with the command that analyses it.
    (only,) = scan_runs(tmp_path / "runs")
    assert (
        evidence_line(only)
        == "recorded, not analysed: driftlab analyze runs/pipeline/20260101T000000Z-0"
    )


def test_corrupt_examples_fail_the_report_in_one_line(tmp_path: Path) -> None:
    run = _run(tmp_path)
    (run / "analysis.json").write_text(json.dumps(analysis_json()))
    examples = examples_json({"stale": [{"key": "k1", "store": "cache"}]})
    examples["kinds"]["stale"]["examples"][0]["evidence"] = "not a list"
    (run / "examples.json").write_text(json.dumps(examples))
    with pytest.raises(OutputFileError, match=r"\(kinds\.stale\.examples\.0\.evidence: "):
        read_examples(run / "examples.json")
    code, output = _report(run)
    assert code == 2 and "examples.json is not examples.json as this driftlab writes it" in output


def test_an_analysis_from_before_untested_and_caveats_reads_with_none(tmp_path: Path) -> None:
    run = _run(tmp_path)
    older = analysis_json(verdict="reproduced", counts={"stale": 2})
    del older["untested"], older["caveats"]
    (run / "analysis.json").write_text(json.dumps(older))
    analysis = read_analysis(run / "analysis.json")
    assert (analysis.untested, analysis.caveats, analysis.counts) == ([], [], {"stale": 2})
    code, _ = _report(run)
    assert code == 0 and (run / "report.html").is_file()


def test_a_failed_reorder_checker_keeps_realtime_lag_an_empty_object(tmp_path: Path) -> None:
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(analysis_json(realtime_lag={})))
    analysis = read_analysis(path)
    assert analysis.realtime_lag is None
    assert analysis.model_dump(mode="json", by_alias=True)["realtime_lag"] == {}


def test_a_failure_message_names_an_unreadable_analysis(tmp_path: Path) -> None:
    """The pytest plugin's and the matrix's failure message: the runner's verdict, and a
    note that names the file no analysis of this driftlab wrote and the fix."""
    run = RunDir(_run(tmp_path))
    run.analysis.write_text(json.dumps({"schema": 1, "counts": {"lost-write": 2}}))
    result = RunResult(run, "cdc-commit-before-apply", 1, verdict="reproduced", exit_code=0)
    result.counts = {"lost-write": 2}
    lines = outcome_of(result, get_scenario("C4")).summary().splitlines()
    note = next(line for line in lines if line.startswith("  note: "))
    assert note.startswith(f"  note: {run.analysis} is not analysis.json as this driftlab")
    assert note.endswith(f"re-run `driftlab analyze {run.path}`")
    assert "  also observed: lost-write 2" in lines


def test_the_report_reads_the_typed_blocks_a_failed_run_holds(tmp_path: Path) -> None:
    """A reorder checker that failed (no realtime lag), a store's lag, a cut-short
    history: the template reads each block of the model, as it read the file's keys."""
    run = _run(tmp_path)
    analysis = analysis_json(
        verdict="inconclusive",
        history={"events": 1234, "cut_short": True, "complete": False, "t1_ns": 2_000_000_000},
        lag={"cache": {"count": 7, "p50_ms": 1.25, "p95_ms": 3.5, "p99_ms": 4.0, "max_ms": 9.0}},
        realtime_lag={},
        checkers={
            "lost": {"status": "ok", "error": None},
            "reorder": {"status": "error", "error": "ValueError: no partition"},
        },
    )
    (run / "analysis.json").write_text(json.dumps(analysis))
    code, _ = _report(run)
    page = (run / "report.html").read_text()
    assert code == 0 and "1,234 events" in page and "The history was cut short" in page
    assert '<td>cache</td><td class="num">7</td><td class="num">1.2 ms</td>' in page
    assert "Worst realtime lag" not in page
    assert '<tr class="unmet"><td>reorder</td><td>error</td><td>ValueError: no partition' in page


def test_a_config_whose_seed_is_no_integer_is_bad_input_before_any_work(tmp_path: Path) -> None:
    run = _run(tmp_path)
    (run / "config.json").write_text(json.dumps({"scenario": "pipeline", "seed": "seven"}))
    with pytest.raises(AnalysisInputError) as caught:
        analyze(run)
    assert str(caught.value).startswith(f"{run / 'config.json'}: seed: input should be")
    assert str(caught.value).endswith("; fix the file or re-run the scenario")
    assert not (run / "analysis.json").exists()
