"""The names the keyed pass's modules share: the groups an event is routed to, the
columns routing adds, and the kinds of series row the pass emits. They live apart from
the step, the sieve and the timeline so that none of those has to import another to
name them."""

from __future__ import annotations

KEY, PARTITION, MESSAGE = 0, 1, 2
"""The three kinds of group (driftlab.checkers.keyed.step's docstring says what each judges)."""

ROUTE_COLUMN, GROUP_COLUMN, POSITION_COLUMN = "_r", "_g", "_pos"

OP_COUNT, OP_LATENCY, SERIES_ROW = "c", "o", "s"
"""Rows of the series (driftlab.checkers.keyed.timeline says what each holds)."""

REALTIME_SERIES = "realtime_lag"
"""The series of series.json that holds each channel partition's worst realtime lag
(RealtimeLag.to_dict), a SERIES_ROW per partition."""
