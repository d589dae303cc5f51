"""The keyed pass's series rows (driftlab.checkers.keyed.timeline), without Spark: the map
side's routing of a small history, then one reduce partition's rows."""

from __future__ import annotations

import json

from keyed_support import history_table

from driftlab.checkers.keyed.columns import OP_COUNT, OP_LATENCY
from driftlab.checkers.keyed.routing import route, with_positions
from driftlab.checkers.keyed.timeline import series_rows
from driftlab.harness.history.schema import OBSERVER, STEP, Event

S = 1_000_000_000


def _op(op_id: str | None, phase: str, t: int, process: str = "c1", **extra: str) -> Event:
    return Event(
        type="op",
        time=t * S,
        process=process,
        phase=phase,
        f="write",
        op_id=op_id,
        key="k",
        store="source",
        extra=json.dumps(extra) if extra else None,
    )


def test_only_a_clients_own_operations_are_counted_and_timed() -> None:
    events = [
        _op("a", "invoke", 1),
        _op("a", "ok", 2),
        # A dual write's write to a derived store: its invocation names the step.
        _op("b", "invoke", 3, **{STEP: "derived"}),
        _op("b", "ok", 5),
        _op("c", "invoke", 4, process=OBSERVER),
        _op("c", "ok", 6, process=OBSERVER),
        _op(None, "ok", 7),
        _op(None, "ok", 8, **{STEP: "derived"}),
    ]
    routed = route(with_positions(history_table(events), 0), 1)
    rows = series_rows(routed.series[0], 0, 10).to_pylist()
    counts = sorted((r["checker"], r["n"]) for r in rows if r["out"] == OP_COUNT)
    latencies = [r["n"] for r in rows if r["out"] == OP_LATENCY]
    assert counts == [("ok", 2)]
    assert latencies == [1 * S]
