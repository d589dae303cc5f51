"""Histories with transactions and view stores (harness/lab/testing/views.py): the planted
counts are what the reference finds, the keyed pass's step (the sieve included) gives
the reference's rows and chances, and `driftlab analyze` (the Spark pass) finds them
too, counting a transaction as one operation and its view states as none."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from reference_counts import reference_anomalies, run_events
from test_keyed_sieve import judged, stepped, stepped_chances
from typer.testing import CliRunner

from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.checkers.coverage import chances
from driftlab.harness.cli import app
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.testing.views import PLANTABLE, TEMPLATES, generate_views
from driftlab.reports.run_report import _evidence_line, render_run_report
from driftlab.reports.transactions import transactions

PLANT = {kind: 3 for kind in PLANTABLE}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory):
    return generate_views(tmp_path_factory.mktemp("views") / "run", 12_000, seed=5, plant=PLANT)


def test_the_reference_finds_the_planted_counts(planted) -> None:
    found = Counter(a.kind for a in reference_anomalies(planted.run_dir))
    assert {k: found[k] for k in ALL_KINDS} == planted.expected
    assert sum(planted.expected.values()) == 3 * len(PLANTABLE)


def test_without_views_the_unversioned_samples_are_not_judged(tmp_path: Path) -> None:
    # The same events, the header without params.views: a document's sample carries no
    # version, so no stale overwrite is seen; two stores judged on every key miss each
    # other's keys.
    run = generate_views(tmp_path / "plain", 12_000, seed=5, plant=PLANT, views=False)
    found = Counter(a.kind for a in reference_anomalies(run.run_dir))
    assert found["stale-overwrite"] == 0
    assert found["missing"] > planted_missing(run.run_dir)


def planted_missing(run_dir: Path) -> int:
    """How many keys the store `docs` lacks while the source holds them."""
    events = run_events(run_dir)
    source = {e.key for e in events if e.type == "state" and e.store == "source" and e.key}
    docs = {e.key for e in events if e.type == "state" and e.store == "docs" and e.key}
    return len({k for k in source if k.startswith("docs/")} - docs)


def test_the_step_and_its_sieve_give_the_reference(planted) -> None:
    events = run_events(planted.run_dir)
    assert stepped(events) == judged(events)
    got, _ = stepped_chances(events)
    assert got == chances(events)


def test_the_evidence_of_a_view_key_names_the_transaction_of_each_state(planted) -> None:
    stale = next(a for a in reference_anomalies(planted.run_dir) if a.kind == "stale")
    evidence = json.loads(stale.evidence)
    names = transactions(RunDir(planted.run_dir).parquet, evidence)
    states = [e for e in evidence if e["type"] == "op" and e["store"] == "source"]
    assert states and {e["op_id"] for e in states} == set(names)
    templates = {*TEMPLATES, "new_order"}
    assert all(n.split(" ")[0] in templates for n in names.values()), names
    lines = [_evidence_line(e, 0, names) for e in evidence]
    # The store's final state beside the view's: both in the evidence, and each state
    # of the view with the transaction behind it.
    finals = {e["store"]: e["value"] for e in evidence if e["type"] == "state"}
    assert set(finals) == {"source", "docs"} and finals["source"] != finals["docs"]
    assert sum("view state" in line and "by txn " in line for line in lines) == len(states)


@pytest.mark.spark
@pytest.mark.slow
def test_analyze_finds_the_planted_counts_and_counts_transactions(spark, planted) -> None:
    result = CliRunner().invoke(app, ["analyze", str(planted.run_dir)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    analysis = json.loads((planted.run_dir / "analysis.json").read_text())
    assert analysis["counts"] == planted.expected
    events = run_events(planted.run_dir)
    assert analysis["coverage"] == chances(events)
    assert set(analysis["lag"]) == {"docs", "totals"}
    series = json.loads((planted.run_dir / "series.json").read_text())
    ops = Counter()
    for row in series["ops"]:
        ops[row["f"]] += row["ok"] + row["fail"] + row["info"]
    txns = sum(1 for e in events if e.f == "txn" and e.phase != "invoke")
    assert ops == {"txn": txns}
    rows = pq.read_table(planted.run_dir / "anomalies.parquet").to_pylist()
    assert Counter(r["kind"] for r in rows) == +Counter(planted.expected)
    page = render_run_report(planted.run_dir).read_text()
    assert "view state" in page and "by txn " in page
