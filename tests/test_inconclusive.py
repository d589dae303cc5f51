"""Nothing checked is not a pass: what makes a run inconclusive, from its history."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from checkers.verdict import UNEXPECTED
from harness.history import events
from harness.history.reader import arrow_schema
from harness.history.schema import COLUMNS, LOG_AUDIT
from harness.rundir import RunDir
from harness.runner.inconclusive import INCONCLUSIVE, apply, reasons_of

CHANNEL = "dbz.items"


def table(*fields: dict) -> pa.Table:
    """A history table of events built by the typed constructors (times in order)."""
    rows = [{c: f.get(c) for c in COLUMNS} | {"time": i} for i, f in enumerate(fields)]
    for r in rows:
        if isinstance(r["extra"], dict):
            r["extra"] = str(r["extra"])
    return pa.Table.from_pylist(rows, schema=arrow_schema())


def write(key: str, value: str, phase: str = "ok") -> dict:
    return events.op("c0", phase, "write", key=key, value=value, store="source", version=1)


def produce(msg_id: str) -> dict:
    return events.msg("produce", channel=CHANNEL, msg_id=msg_id, partition=0, offset=0)


def deliver(msg_id: str, consumer: str = "cdc-sync") -> dict:
    return events.msg("deliver", channel=CHANNEL, msg_id=msg_id, consumer=consumer)


def test_a_run_whose_pipeline_delivered_nothing_is_missing_its_observations() -> None:
    # The consumer never started: the writes went in, the log holds them (the audit read
    # them back), and nobody downstream saw a thing.
    history = table(
        write("a", "a1"),
        write("b", "b1", phase="info"),
        produce("m1"),
        produce("m2"),
        deliver("m1", consumer=LOG_AUDIT),
        deliver("m2", consumer=LOG_AUDIT),
        events.state("cache", None, None),
    )
    why = reasons_of(history, []).unobserved
    assert len(why) == 2
    assert why[0].startswith("nothing was delivered: 2 message(s) produced on dbz.items")
    assert why[1].startswith("nothing reached the derived side: 2 source write(s)")


def test_one_delivery_or_one_derived_write_is_an_observation() -> None:
    assert not reasons_of(table(write("a", "a1"), produce("m1"), deliver("m1")), []).lines
    dual_write = table(
        write("a", "a1"), events.op("c0", "ok", "write", key="a", value="a1", store="cache")
    )
    assert not reasons_of(dual_write, []).lines
    # A consumer that saw the change and rightly skipped it observed it.
    skipped = table(write("a", "a1"), events.msg("skip", store="cache", key="a", value="a1"))
    assert not reasons_of(skipped, []).lines


def test_a_read_of_a_derived_store_is_an_observation_a_read_of_the_source_is_not() -> None:
    read_cache = events.op("c1", "ok", "read", key="a", value="a1", store="cache")
    assert not reasons_of(table(write("a", "a1"), read_cache), []).lines
    read_source = events.op("c1", "ok", "read", key="a", value="a1", store="source")
    assert len(reasons_of(table(write("a", "a1"), read_source), []).unobserved) == 1


def test_failed_writes_and_a_history_without_operations() -> None:
    # A write that certainly failed committed nothing a pipeline could have carried.
    assert not reasons_of(table(write("a", "a1", phase="fail")), []).lines
    assert reasons_of(table(events.mark("end")), []).lines == [
        "the workload never ran: the history holds no client operation"
    ]


SCHEDULE = [
    {"kind": "crash", "target": "consumer", "at": 2.0, "duration": 1.0},
    {"kind": "cut", "target": "consumer->redis", "at": 4.5, "duration": 1.0},
    {"kind": "crash", "target": "consumer", "at": 7.0, "duration": 1.0},
]


def test_each_scheduled_fault_that_never_took_effect_is_named() -> None:
    ran = [write("a", "a1"), events.op("c0", "ok", "write", key="a", value="a1", store="cache")]
    history = table(
        *ran,
        events.fault("start", "crash", target="consumer", fault_id="f1", extra={"at": 2.0}),
        events.fault("stop", "crash", target="consumer", fault_id="f1"),
        events.fault("start", "cut", target="consumer->redis", fault_id="f2"),
        events.fault(
            "stop", "cut", target="consumer->redis", fault_id="f2", error="not injected: no link"
        ),
    )
    assert reasons_of(history, SCHEDULE).faults == [
        "scheduled fault cut consumer->redis at 4.5 s: not injected: no link",
        "scheduled fault crash consumer at 7.0 s never started (the run ended before it)",
    ]
    every = table(
        *ran,
        *(
            events.fault(phase, f["kind"], target=f["target"], fault_id=f"f{i}")
            for i, f in enumerate(SCHEDULE)
            for phase in ("start", "stop")
        ),
    )
    assert not reasons_of(every, SCHEDULE).lines


def test_many_channels_are_named_a_few() -> None:
    sends = [events.msg("produce", channel=f"k{i}", msg_id=f"m{i}") for i in range(7)]
    (why,) = reasons_of(table(events.op("c0", "ok", "send"), *sends), []).unobserved
    assert "produced on k0, k1, k2, k3, k4 and 2 more," in why


def _run(tmp_path: Path, history: pa.Table) -> RunDir:
    run = RunDir(tmp_path)
    run.config.write_text(json.dumps({"params": {"faults": []}}))
    pq.write_table(history, run.parquet)
    return run


def test_a_loss_where_nothing_was_observed_does_not_keep_the_verdict(tmp_path: Path) -> None:
    run = _run(tmp_path, table(write("a", "a1"), produce("m1"), events.mark("quiesced")))
    analysis = {"verdict": UNEXPECTED, "forbidden_found": ["lost-message", "lost-write"]}
    why = apply(run, analysis)
    assert why and analysis["verdict"] == INCONCLUSIVE and analysis["inconclusive"] == why
    assert json.loads(run.analysis.read_text())["verdict"] == INCONCLUSIVE
    # Any other forbidden kind is evidence by itself: two messages at one offset.
    kept = {"verdict": UNEXPECTED, "forbidden_found": ["inconsistent-offset", "lost-message"]}
    assert apply(run, kept) == [] and kept["verdict"] == UNEXPECTED
