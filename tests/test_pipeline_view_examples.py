"""The two examples of transactions and views (issue 37) on the real stack, each file
as a user runs it.

examples/orders_to_redis: orders and their lines written in transactions, a Go
consumer keeping one JSON document per order in Redis from logical decoding, slowed,
crashed while behind and cut off from Redis. Applying each source transaction whole
holds; applying rows one by one with the slot moved first is caught as `phantom`
documents (half a transaction), each row naming its order and showing Redis's
document beside the states the order had.

examples/debezium_order_totals: a table seeded before the run, Debezium's snapshot and
stream of it, a consumer keeping each order's total in Redis; the Connect worker is
SIGKILLed before its offsets say the snapshot ended. Setting state from each record
holds; adding amounts counts what Debezium sends again twice, caught as `phantom`
totals.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from pipeline_support import assert_passed, caught, final_states, history

from driftlab.harness.app.pipeline import PipelineResult, run_pipeline
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.pipeline.spec import load

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
ORDERS = EXAMPLES / "orders_to_redis"
TOTALS = EXAMPLES / "debezium_order_totals"


def run(path: Path, stack: Stack, tmp_path: Path, seed: int) -> PipelineResult:
    """The pipeline file at `path`, run on `stack` as `driftlab run` does."""
    return run_pipeline(load(path), seed=seed, runs_dir=tmp_path, stack=stack)


def run_held(
    path: Path, stack: Stack, tmp_path: Path, seed: int, windows: int, store: str
) -> tuple[PipelineResult, list[dict[str, Any]]]:
    """Run `path`, which must pass with its `windows` faults, `store` ending equal to
    the views of more than 20 keys; the run and its history."""
    out = run(path, stack, tmp_path, seed)
    assert_passed(out, fault_windows=windows)
    events = history(out.run.run_dir)
    held, source = final_states(events, store), final_states(events, "source")
    assert held == source and len(source) > 20
    return out, events


@pytest.fixture(scope="module")
def go_consumer() -> None:
    """The Go consumer's own tests, which also leave its build in Go's cache: the
    pipeline's `go run .` then starts in a second, not a minute."""
    subprocess.run(["go", "test", "./..."], cwd=ORDERS / "consumer", check=True, timeout=600)


def view_states(events: list[dict[str, Any]], store: str) -> dict[str, list[str | None]]:
    """Each key's committed view states of `store`, in version order (None: absent)."""
    out: dict[str, list[tuple[int, str | None]]] = {}
    invokes = {e["op_id"]: e for e in events if e["type"] == "op" and e["phase"] == "invoke"}
    for e in events:
        if e["type"] == "op" and e["phase"] == "ok" and e["key"].startswith(f"{store}/"):
            inv = invokes[e["op_id"]]
            if inv.get("process") != "observer":
                out.setdefault(e["key"], []).append((e["version"], inv.get("value")))
    return {k: [v for _, v in sorted(states)] for k, states in out.items()}


def assert_phantoms_shown(rows: list[dict[str, Any]], store: str) -> set[str]:
    """Every phantom row's evidence shows what the store held (its final state, or a
    read of the observer that showed it for a while) beside the view's committed
    states, none of which it equals; the keys named."""
    assert rows
    for row in rows:
        assert row["store"] == store and row["key"].startswith(f"{store}/")
        evidence = json.loads(row["evidence"])
        held = [e.get("value") for e in evidence if e["type"] == "state" and e["store"] == store]
        read = [
            e.get("value")
            for e in evidence
            if e["type"] == "op" and e["store"] == store and e.get("f") == "read"
        ]
        states = [e.get("value") for e in evidence if e["type"] == "op" and e["store"] == "source"]
        assert len(held) <= 1 and states, evidence
        assert any(v is not None and v not in states for v in held + read), evidence
    return {row["key"] for row in rows}


def assert_report_names(out: PipelineResult, keys: set[str], templates: tuple[str, ...]) -> None:
    """The run's report shows a phantom key, and the transaction behind a view state
    beside it as `<template> (<op id>)`."""
    report = out.run.run_dir.report.read_text()
    assert any(k in report for k in keys)
    assert any(f"{t} (" in report for t in templates)


def snapshots_taken(stack: Stack, run_dir: RunDir) -> int:
    """How many snapshots Debezium began in the run's topic (records whose
    `source.snapshot` is "first"), the topic named by the consumer's ready line."""
    found = re.search(r"topic (\S+)", run_dir.log("totals.log").read_text())
    assert found
    part = TopicPartition(found[1], 0)
    consumer = Consumer(kafka_client_config(stack, None, {"group.id": "test-view-examples"}))
    try:
        low, high = consumer.get_watermark_offsets(part, timeout=10)
        consumer.assign([TopicPartition(found[1], 0, low)])
        firsts, offset = 0, low
        while offset < high:
            msg = consumer.poll(10)
            assert msg is not None and not msg.error(), msg and msg.error()
            event = json.loads(msg.value())
            firsts += event["source"].get("snapshot") == "first"
            offset = msg.offset() + 1
        return firsts
    finally:
        consumer.close()


def test_the_transactional_go_consumer_holds(
    stack: Stack, spark: object, tmp_path: Path, go_consumer: None
) -> None:
    out, events = run_held(ORDERS / "pipeline.toml", stack, tmp_path, 3, windows=4, store="docs")
    # Every transaction template ran, and the views recorded deletes (dropped orders).
    names = {
        json.loads(e["extra"])["name"]
        for e in events
        if e["type"] == "op" and e["phase"] == "invoke" and e["f"] == "txn"
    }
    assert names == {"place_order", "amend_line", "drop_order"}
    assert any(None in states for states in view_states(events, "docs").values())
    # The consumer was SIGKILLed twice: three instances, the later ones resuming the slot.
    log = out.run.run_dir.log("consumer.log").read_text()
    assert log.count("consumer ready") == 3 and log.count("restarted=true") == 2


def test_rows_applied_one_by_one_leave_phantom_documents(
    stack: Stack, spark: object, tmp_path: Path, go_consumer: None
) -> None:
    out = run(ORDERS / "pipeline-bug.toml", stack, tmp_path, seed=3)
    keys = assert_phantoms_shown(caught(out, "phantom"), "docs")
    # A phantom is a document the order never had: some stay so to the end (others
    # were shown only for a while, then repaired by a later transaction of the order).
    events = history(out.run.run_dir)
    states, held = view_states(events, "docs"), final_states(events, "docs")
    final = {k for k in keys if held.get(k) is not None and held[k] not in states[k]}
    assert final
    assert_report_names(out, keys, ("place_order", "amend_line", "drop_order"))
    # The run did not converge on the documents that stayed phantom.
    (div,) = out.not_converged
    assert div.store == "docs" and final <= set(div.keys)


def test_debezium_totals_hold_through_a_connect_crash_at_the_snapshot(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    out, events = run_held(TOTALS / "pipeline.toml", stack, tmp_path, 5, windows=2, store="totals")
    # The seed's transactions committed before the workload: the snapshot's rows.
    start = next(e["time"] for e in events if e.get("kind") == "workload-start")
    seeded = [e for e in events if e["type"] == "op" and e.get("process") == "seed"]
    assert seeded and all(e["time"] < start for e in seeded)
    # The Connect crash came before its offsets recorded the snapshot's end: restarted,
    # Debezium snapshotted the table again, and the totals are still exact.
    assert snapshots_taken(stack, out.run.run_dir) == 2


def test_adding_amounts_counts_a_resent_snapshot_twice(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    out = run(TOTALS / "pipeline-bug.toml", stack, tmp_path, seed=5)
    keys = assert_phantoms_shown(caught(out, "phantom"), "totals")
    # Each phantom total is above the order's final one: lines counted twice.
    events = history(out.run.run_dir)
    held, source = final_states(events, "totals"), final_states(events, "source")
    assert any(k in source and float(held[k]) > float(source[k]) for k in keys)
    assert_report_names(out, keys, ("set_line", "remove_line"))
