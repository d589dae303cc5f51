"""`driftlab matrix`: the plan of cells, the budget, the JUnit report and the suite page;
one real run with a planted forbidden anomaly on the real stack."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from driftlab.harness.app import matrix as matrix_module
from driftlab.harness.app.matrix import Cell, parse_seeds, plan, run_matrix, with_schedule
from driftlab.harness.app.suite_index import junit_xml, write_matrix_outputs
from driftlab.harness.cli import app
from driftlab.scenarios.catalogue.registry import get_scenario


def test_cells_go_seed_by_seed_over_schedules_and_scenarios() -> None:
    scs = [get_scenario("C1"), get_scenario("C17")]
    cells = plan(scs, ["own", "none", "latency"], [4, 5])
    names = [(c.seed, c.scenario.name) for c in cells]
    # direct-messaging has no store link: no latency cell for it.
    assert names[:5] == [
        (4, "dual-write-race"),
        (4, "direct-messaging-consumer-offline"),
        (4, "dual-write-race+none"),
        (4, "direct-messaging-consumer-offline+none"),
        (4, "dual-write-race+latency"),
    ]
    assert len(cells) == 10 and {c.seed for c in cells[5:]} == {5}


def test_schedules_change_only_the_faults() -> None:
    sc = get_scenario("C2")
    none = with_schedule(sc, "none")
    assert none is not None and none.faults.faults == () and none.expectations == sc.expectations
    latency = with_schedule(sc, "latency")
    assert latency is not None
    extra = latency.faults.faults[len(sc.faults.faults) :]
    assert [(f.kind, f.target, f.params["ms"]) for f in extra] == [("latency", "postgres", 100)]
    assert extra[0].at + extra[0].duration <= sc.workload.duration
    with pytest.raises(ValueError, match="unknown fault schedule 'flood'; choose from own"):
        plan([sc], ["flood"], [0])


def test_seeds_accept_a_count_a_list_and_a_range() -> None:
    assert parse_seeds("3") == [0, 1, 2]
    assert parse_seeds("1,5,9") == [1, 5, 9]
    assert parse_seeds("2-4") == [2, 3, 4]
    with pytest.raises(ValueError, match=r"a count .* a list .* or a range"):
        parse_seeds("some")


def test_bad_input_exits_2_with_the_problem() -> None:
    out = CliRunner().invoke(app, ["matrix", "--scenarios", "C99", "--dry-run"])
    assert out.exit_code == 2 and "no scenario 'C99'" in out.output
    out = CliRunner().invoke(app, ["matrix", "--budget", "soon", "--dry-run"])
    assert out.exit_code == 2 and "is not a duration" in out.output


def test_a_spent_budget_skips_every_cell_and_junit_lists_them(tmp_path: Path) -> None:
    cells = plan([get_scenario("C1")], ["own", "none"], [0])
    result = run_matrix(cells, budget_s=0, runs_dir=tmp_path / "runs", stack=None)
    assert result.outcomes == [] and len(result.skipped) == 2
    suite = ET.fromstring(junit_xml(result)).find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("skipped") == "2"
    assert not (tmp_path / "runs").exists()


@pytest.mark.services
@pytest.mark.spark
@pytest.mark.slow
# A stack, a run and a Spark analysis; on a loaded two-core machine more than 600 s.
@pytest.mark.timeout(1200)
def test_a_forbidden_anomaly_is_a_junit_failure_and_the_page_lists_every_run(
    stack: object, tmp_path: Path
) -> None:
    # Planted: the claim that dual writes reach the stores in one order (C1 shows they do
    # not). Crossed writes come by the hundred in 3 s; a stale final state is rarer in 3 s
    # (one loaded CI run had none), so forbidding it would make a flaky planted bug.
    claimed_safe = dataclasses.replace(
        get_scenario("dual-write-race").with_overrides(duration=3),
        name="dual-write-claimed-safe",
        expectations={"stale-overwrite": "absent", "phantom": "absent"},
    )
    runs = tmp_path / "runs"
    result = run_matrix([Cell(claimed_safe, "own", 7)], 600, runs, stack)
    assert [o.result.verdict for _, o in result.outcomes] == ["unexpected anomaly"]
    assert result.forbidden and not result.errors
    index = write_matrix_outputs(runs, result, tmp_path / "matrix.xml")
    case = ET.parse(tmp_path / "matrix.xml").getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "own seed 7"
    failure = case.find("failure")
    assert failure is not None and "forbidden anomaly stale-overwrite" in (failure.text or "")
    assert failure.get("message", "").startswith(
        "driftlab scenario dual-write-claimed-safe (claim C1), seed 7: "
        "unexpected anomaly: stale-overwrite "
    )
    page = index.read_text()
    run_dir = Path(result.outcomes[0][1].result.run_dir)
    assert f"{run_dir.relative_to(runs).as_posix()}/report.html" in page
    assert (runs / "matrix.json").is_file()


def test_a_variant_rerun_command_plans_exactly_that_cell() -> None:
    cell = plan([get_scenario("C2").with_overrides(duration=4)], ["latency"], [9])[0]
    argv = cell.rerun("dual-write-partial-failure").split()
    assert argv[:2] == ["driftlab", "matrix"]
    out = CliRunner().invoke(app, [*argv[1:], "--dry-run"])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[0] == "dual-write-partial-failure+latency seed 9 (4 s)"
    assert "1 cells" in out.output


@pytest.mark.services
@pytest.mark.slow
def test_a_cell_running_at_the_deadline_is_cut(
    stack: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The planner would not start a 60 s cell on an 8 s budget: make it start, as a cell
    # whose estimate was too low (its first run, a slow analysis) does.
    monkeypatch.setattr(matrix_module, "_estimate", lambda cell, walls: 0.0)
    long = get_scenario("dual-write-race").with_overrides(duration=60)
    cells = plan([long], ["own", "none"], [0])
    result = run_matrix(cells, 8, tmp_path / "runs", stack)
    assert result.outcomes == [] and len(result.cut) == 1 and len(result.skipped) == 1
    # Stopped at the deadline, not at the end of its 60 s workload: the time left is the
    # stop itself (heal, close the history).
    assert result.wall_s < 8 + 15, f"the matrix took {result.wall_s:.1f} s on an 8 s budget"
    run = result.cut[0][1].result
    assert run.interrupted and run.verdict is None
    assert not result.interrupted and not result.errors  # a cut is no failure of the lab
    marks = [
        json.loads(line).get("kind")
        for segment in (Path(run.run_dir) / "history").glob("*.jsonl")
        for line in segment.read_text().splitlines()
        if '"type":"mark"' in line
    ]
    assert "end" not in marks
    suite = ET.fromstring(junit_xml(result)).find("testsuite")
    assert suite is not None and suite.get("skipped") == "2"
    assert b"cut at the deadline of the budget" in junit_xml(result)
