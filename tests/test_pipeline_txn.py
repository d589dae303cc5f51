"""A transactional pipeline on the real stack: orders and their lines written in
transactions on a source seeded before the processes start, a Python consumer keeping
one JSON document per order in Redis, crashed once. The history holds each transaction
as one `txn` op and each state of each order's document (the view) with its exact
version; the correct consumer's run converges."""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pipeline_support import PIPELINES, history

from driftlab.harness.app.pipeline import PipelineResult, run_pipeline
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.pipeline.spec import load

pytestmark = [pytest.mark.services, pytest.mark.slow]


def run(tmp_path: Path, stack: Stack) -> PipelineResult:
    return run_pipeline(
        load(PIPELINES / "orders_txn.toml"),
        seed=3,
        runs_dir=tmp_path / "runs",
        stack=stack,
        analyze=False,
    )


def ops(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every op's events by op id, invoke first."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in sorted((e for e in events if e["type"] == "op"), key=lambda e: e["time"]):
        out[e["op_id"]].append(e)
    return out


def test_transactions_views_and_seed_are_recorded_exactly(stack: Stack, tmp_path: Path) -> None:
    out = run(tmp_path, stack)
    r = out.run
    assert r.error is None and out.not_converged == [], (r.error, out.not_converged)
    events = history(r.run_dir)
    header = next(e for e in events if e["type"] == "header")
    assert json.loads(header["extra"])["params"]["views"] == ["docs", "totals"]
    start = next(e["time"] for e in events if e.get("kind") == "workload-start")
    by_id = ops(events)
    txns = {i: evs for i, evs in by_id.items() if evs[0]["f"] == "txn"}
    seeded = [evs for evs in txns.values() if evs[0]["process"] == "seed"]
    assert len(seeded) == 30 and all(evs[-1]["time"] < start for evs in seeded)
    names = {json.loads(evs[0]["extra"])["name"] for evs in txns.values()}
    assert names == {"new_order", "ship", "drop_order"}
    # Each view state is a step of one transaction, completed as it was: one per view
    # store of every transaction that got as far as its views.
    versions: dict[str, list[tuple[int, str | None]]] = defaultdict(list)
    stepped: dict[str, set[str]] = defaultdict(set)
    for evs in by_id.values():
        first, last = evs[0], evs[-1]
        extra = json.loads(first["extra"]) if first.get("extra") else {}
        if extra.get("step") != "view-state":
            continue
        txn = txns[extra["txn"]]
        store, _, key = first["key"].partition("/")
        assert last["phase"] == txn[-1]["phase"] and key == txn[0]["key"]
        assert (first["f"] == "delete") == (first.get("value") is None)
        stepped[extra["txn"]].add(store)
        if last["phase"] == "ok":
            assert last["version"] == txn[-1]["version"]
            versions[first["key"]].append((last["version"], first.get("value")))
    assert all(stores == {"docs", "totals"} for stores in stepped.values())
    assert all(stepped.get(i) for i, evs in txns.items() if evs[-1]["phase"] == "ok")
    # Per key, versions 1, 2, ... in commit order (which the key's lock makes the
    # order of the completions).
    assert versions
    for key, seen in versions.items():
        assert [v for v, _ in seen] == list(range(1, len(seen) + 1)), key
    # An order dropped after it held lines: its view has no row, a delete state.
    assert any(
        before is not None and after is None
        for seen in versions.values()
        for (_, before), (_, after) in pairwise(seen)
    )
    # The final states: the views' at the source, what each store holds, and they agree.
    finals = [e for e in events if e["type"] == "state" and e.get("key")]
    source = {e["key"]: e["value"] for e in finals if e["store"] == "source"}
    for store in ("docs", "totals"):
        held = {e["key"]: e["value"] for e in finals if e["store"] == store}
        assert held and held == {k: v for k, v in source.items() if k.startswith(f"{store}/")}
    # The last committed state of each key is its final one (absent: deleted).
    assert {k: s[-1][1] for k, s in versions.items() if s[-1][1] is not None} == source
    reads = [e for e in events if e["type"] == "op" and e["process"] == "observer"]
    assert reads and all(e["key"].startswith(f"{e['store']}/") for e in reads)
    # The consumer reads a snapshot: every document it showed is a committed state.
    assert outside_the_view(events) == []
    # `compare` projects the documents; a jsonb column is read as its JSON.
    doc = json.loads(next(v for k, v in source.items() if k.startswith("docs/")))
    assert set(doc) == {"status", "lines"}
    total = json.loads(next(v for k, v in source.items() if k.startswith("totals/")))
    assert set(total) == {"total", "lines"} and total["lines"] >= 1


SEED_SQL = """
INSERT INTO {source.schema}.orders SELECT 'k' || i, 'c0', 'old' FROM generate_series(0, 19) i;
INSERT INTO {source.schema}.lines SELECT 'k' || i, 1, i + 0.5 FROM generate_series(0, 19) i;
"""


def run_edited(
    tmp_path: Path, stack: Stack, old: str, new: str, analyze: bool = False
) -> PipelineResult:
    """A run of orders_txn.toml with `old` replaced by `new`, from `tmp_path`."""
    text = (PIPELINES / "orders_txn.toml").read_text()
    assert old in text
    text = text.replace(old, new).replace('"order_docs.py"', f'"{PIPELINES / "order_docs.py"}"')
    path = tmp_path / "orders.toml"
    path.write_text(text)
    return run_pipeline(
        load(path), seed=4, runs_dir=tmp_path / "runs", stack=stack, analyze=analyze
    )


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("SET status = 'shipped'", "SET state = 'shipped'", "source.transactions[1] (ship):"),
        ("o.id = {key}", "o.nope = {key}", "stores.docs.view:"),
    ],
)
def test_a_statement_or_view_that_fails_is_named_before_the_workload(
    stack: Stack, tmp_path: Path, old: str, new: str, named: str
) -> None:
    r = run_edited(tmp_path, stack, old, new).run
    assert r.exit_code == exitcodes.BAD_INPUT, r.error
    assert r.error is not None and r.error.startswith(f"{named} fails on PostgreSQL: column")


def test_a_seed_script_is_recorded_as_one_transaction(stack: Stack, tmp_path: Path) -> None:
    (tmp_path / "seed.sql").write_text(SEED_SQL)
    out = run_edited(
        tmp_path,
        stack,
        "seed = { rows = 30 }",
        'seed = { sql = "seed.sql", keys = "SELECT id FROM {source.schema}.orders" }',
    )
    assert out.run.error is None and not out.not_converged, (out.run.error, out.not_converged)
    events = history(out.run.run_dir)
    by_id = ops(events)
    (seed,) = [
        evs for evs in by_id.values() if evs[0]["process"] == "seed" and evs[0]["f"] == "txn"
    ]
    assert json.loads(seed[0]["extra"])["name"] == "seed" and seed[0].get("key") is None
    states = [
        evs
        for evs in by_id.values()
        if evs[0].get("extra") and json.loads(evs[0]["extra"]).get("txn") == seed[0]["op_id"]
    ]
    assert sorted(evs[0]["key"] for evs in states) == sorted(
        f"{store}/k{i}" for store in ("docs", "totals") for i in range(20)
    )
    assert all(evs[-1]["phase"] == "ok" and evs[-1]["version"] == 1 for evs in states)
    k3 = next(evs[0]["value"] for evs in states if evs[0]["key"] == "docs/k3")
    assert json.loads(k3) == {"status": "old", "lines": [{"line": 1, "amount": 3.5}]}
    # Keys k8..k19 are seeded only: the consumer's snapshot carried them, as the view says.
    finals = {
        (e["store"], e["key"]): e["value"] for e in events if e["type"] == "state" and e.get("key")
    }
    assert (
        finals[("docs", "docs/k19")]
        == finals[("source", "docs/k19")]
        == ('{"lines":[{"amount":19.5,"line":1}],"status":"old"}')
    )
    totals = ('{"lines":1,"total":19.5}',) * 2
    assert (finals[("totals", "totals/k19")], finals[("source", "totals/k19")]) == totals


TOTALS_STORE = (PIPELINES / "orders_txn.toml").read_text().split("# A second view")[1]
TOTALS_STORE = "# A second view" + TOTALS_STORE.split("[workload]")[0]


def test_a_correct_consumer_is_held(stack: Stack, tmp_path: Path) -> None:
    # One view store: the checkers judge several once they scope keys by params.views.
    out = run_edited(tmp_path, stack, TOTALS_STORE, "", analyze=True)
    r = out.run
    assert r.error is None and not out.not_converged, (r.error, r.counts)
    assert r.verdict == "held", (r.verdict, r.counts)


def outside_the_view(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The observer's reads of a document that is no state its view ever had."""
    states: dict[str, set[str | None]] = defaultdict(set)
    for e in events:
        extra = json.loads(e["extra"]) if e["type"] == "op" and e.get("extra") else {}
        if extra.get("step") == "view-state" and e["phase"] == "invoke":
            states[e["key"]].add(e.get("value"))
    return [
        e
        for e in events
        if e["type"] == "op"
        and e["process"] == "observer"
        and e["phase"] == "ok"
        and e.get("value") is not None
        and e["value"] not in states[e["key"]]
    ]


def test_a_torn_consumer_is_caught_though_its_documents_end_right(
    stack: Stack, tmp_path: Path
) -> None:
    # The consumer shows documents no transaction made, then repairs them: the final
    # states are right, the observer's reads are phantoms, each key named.
    out = run_edited(
        tmp_path,
        stack,
        'TOTALS = "{namespace}.totals" }',
        'TOTALS = "{namespace}.totals", BUG = "torn" }',
        analyze=True,
    )
    r = out.run
    assert r.error is None, r.error
    torn = outside_the_view(history(r.run_dir))
    assert torn and all(e["key"].startswith("docs/") for e in torn)
    assert r.verdict != "held" and r.counts.get("phantom"), (r.verdict, r.counts)
    rows = pq.read_table(r.run_dir.anomalies).to_pylist()
    phantoms = [row for row in rows if row["kind"] == "phantom"]
    assert all(row["store"] == "docs" for row in phantoms), phantoms
    # A torn key whose order is gone at the end is judged on no final state.
    assert {row["key"] for row in phantoms} & {e["key"] for e in torn}, (phantoms, torn)
