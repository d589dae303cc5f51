"""series.json: per-time-bucket aggregates for the report, their buckets and order.

The keyed pass makes every series' rows (driftlab.checkers.keyed.timeline, the anomalies and the
lag in the partition step) and its summary stage adds them up (driftlab.checkers.figures). Only
aggregates reach the driver (at most MAX_BUCKETS buckets per series and group), so the
file stays small whatever the history's size. Format: docs/analysis.md.
"""

from __future__ import annotations

import math
from typing import Any

from driftlab.checkers.keyed.columns import REALTIME_SERIES
from driftlab.harness.history.schema import OpPhase

MAX_BUCKETS = 1200
NS = 1_000_000_000
COMPLETIONS = (OpPhase.OK.value, OpPhase.FAIL.value, OpPhase.INFO.value)
HISTORY_SERIES = {
    "ops": ["t", "f"],
    "latency": ["t", "f"],
    "faults": ["start", "fault_id"],
    "offsets": ["t", "consumer", "channel", "partition"],
    "marks": ["t", "kind", "consumer", "channel"],
    REALTIME_SERIES: ["channel", "partition"],
}
"""The series of series.json that come from the history itself (made in the keyed pass,
driftlab.checkers.keyed.timeline; the realtime lag, each channel partition's worst poll, by the
partition step), each with the columns it is sorted by."""


def bucket_seconds(t0_ns: int, t1_ns: int) -> int:
    """1 second, widened to a whole number of seconds so a run has <= MAX_BUCKETS."""
    span_s = max(0, t1_ns - t0_ns) / NS
    return max(1, math.ceil(span_s / MAX_BUCKETS))


def sorted_rows(rows: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """`rows` sorted by the columns `order`, nulls first (as Spark sorts)."""
    return sorted(rows, key=lambda r: [(r[c] is not None, r[c]) for c in order])
