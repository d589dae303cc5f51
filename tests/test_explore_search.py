"""The search: each claim's property holds or breaks as docs/claims.md predicts, shrunk."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from driftlab.checkers.anomaly import KINDS
from driftlab.harness.cli import app
from driftlab.harness.history.reader import read_history
from driftlab.harness.lab.explore.properties import PROPERTIES, Property, available_checkers
from driftlab.harness.lab.explore.schedule import Schedule
from driftlab.harness.lab.explore.search import search
from driftlab.scenarios.catalogue.architectures import simulated_setup

# Minimal executed schedules (steps before the quiesce) the shrinker reaches.
MINIMAL_STEPS = {
    "dual-write-converges": 4,  # Figure 11-4
    "dual-write-crash-loses-keys": 2,  # write the db, crash
    "cdc-redelivers": 3,  # write, receive, crash
    "commit-before-apply-loses": 5,  # two writes, receive one, commit, crash
    "counter-double-counts": 4,  # write, receive, apply, crash
    "amqp-keeps-order": 5,  # two writes, each worker receives one, one crashes
    "slow-consumer-loses": 4,  # retention (3) + 1 writes
    "unchecked-invariant": 5,  # deposit, two validations, two appends
}


def _examples(prop: Property) -> int:
    return 600 if prop.predicted == "fails" else 150


@pytest.mark.parametrize("prop", PROPERTIES, ids=lambda p: p.name)
def test_property_holds_or_breaks_as_predicted(prop: Property) -> None:
    result = search(simulated_setup(prop.setup), prop, examples=_examples(prop), seed=0)
    assert result.as_predicted, result.run and result.run.executed
    if not result.found:
        assert result.examples == _examples(prop)
        return
    assert result.run is not None
    assert prop.broken_by(result.run.findings)
    assert len(result.run.executed) - 1 == MINIMAL_STEPS[prop.name]
    judged = {k for name in available_checkers() for k in KINDS[name]}
    if prop.kinds & judged:
        assert result.breaking, "the reference checkers confirm the break"


@pytest.mark.parametrize("seed", [5, 11])
def test_dual_write_shrinks_to_figure_11_4(seed: int) -> None:
    result = search(simulated_setup(PROPERTIES[0].setup), PROPERTIES[0], examples=500, seed=seed)
    assert result.run is not None
    steps = [(s.action, s.actor, s.key) for s in result.run.executed]
    assert steps == [
        ("db-write", "c1", "k1"),
        ("db-write", "c2", "k1"),
        ("cache-write", "c2", "k1"),
        ("cache-write", "c1", "k1"),
        ("quiesce", None, None),
    ]
    assert {(a.kind, a.store, a.key) for a in result.breaking} == {("stale", "cache", "k1")}


def test_one_crash_suffices_for_loss_and_reorder() -> None:
    by_name = {p.name: p for p in PROPERTIES}
    for name in ("commit-before-apply-loses", "amqp-keeps-order", "counter-double-counts"):
        result = search(simulated_setup(by_name[name].setup), by_name[name], examples=600, seed=0)
        assert result.run is not None
        assert [s.action for s in result.run.executed].count("crash") == 1


def test_same_seed_same_search() -> None:
    prop = next(p for p in PROPERTIES if p.name == "amqp-keeps-order")
    spec = simulated_setup(prop.setup)
    first, second = search(spec, prop, 600, seed=3), search(spec, prop, 600, seed=3)
    assert first.run is not None and second.run is not None
    assert first.examples == second.examples
    assert first.run.executed == second.run.executed


def test_cli_explore_saves_the_minimal_schedule(tmp_path: Path) -> None:
    out = tmp_path / "schedule.json"
    history = tmp_path / "history.jsonl"
    args = ["explore", "dual-write", "--seed", "11", "-n", "300", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--history", str(history)])
    assert result.exit_code == 0, result.output
    assert "client c2 writes k1=c2-1 to the cache" in result.output
    assert "driftlab explore dual-write --seed 11" in result.output
    sched = Schedule.load(out)
    assert sched.setup == "dual-write" and sched.seed == 11
    assert sched.property == "dual-write-converges"
    assert [s.action for s in sched.steps][-1] == "quiesce"
    assert any(a["kind"] == "stale" for a in sched.anomalies)
    read = read_history(history)
    assert read.info.complete
    assert {"op", "state", "mark"} <= set(read.table.column("type").to_pylist())


def test_cli_explore_reports_a_property_that_held(tmp_path: Path) -> None:
    args = ["explore", "event-sourced-checked", "--seed", "1", "-n", "50"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "s.json")])
    assert result.exit_code == 0, result.output
    assert "held over 50 schedules" in result.output
    assert not (tmp_path / "s.json").exists()


def test_cli_explore_fails_when_the_search_misses_a_predicted_break(tmp_path: Path) -> None:
    args = ["explore", "amqp", "--seed", "0", "-n", "1", "--out", str(tmp_path / "s.json")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "NOT as predicted" in result.output
    assert "reproduce amqp-keeps-order: driftlab explore amqp --seed 0" in result.output


def test_cli_explore_refuses_an_unknown_setup() -> None:
    result = CliRunner().invoke(app, ["explore", "dual-wirte"])
    assert result.exit_code == 2
    assert "unknown setup 'dual-wirte'" in result.output and "dual-write" in result.output


def test_cli_explore_saves_into_the_runs_folder_and_cuts_no_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Piped (CliRunner: no terminal, 80 columns), from a folder that must stay clean.
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "elsewhere" / "runs"
    args = ["explore", "dual-write", "--seed", "7", "-n", "100", "--runs-dir", str(runs)]
    result = CliRunner().invoke(app, args, terminal_width=80)
    assert result.exit_code == 0, result.output
    assert Schedule.load(runs / "explore" / "dual-write-7.json").seed == 7
    assert list(tmp_path.iterdir()) == [tmp_path / "elsewhere"]
    assert "contradictory-order" in result.output and "…" not in result.output
