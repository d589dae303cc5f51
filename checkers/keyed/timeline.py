"""The history's own series (series.json: ops, latency, faults, offsets, marks), made in
the keyed pass beside the checks.

The map side picks the few columns the series read from the rows that feed them
(`SERIES_ROWS`) and buckets them so that an operation's invocation and completion, a
fault's start and stop, and a consumer's partition land in one bucket. Each reduce
partition, which knows the history's clock span from the merged Facts, turns its share
into pass rows (driftlab.checkers.keyed.step.OUTPUT_DDL):

- OP_COUNT: completions of one `f` and phase (in `checker`) in one time bucket, `n`
  of them (a partition's part: the summary adds them up);
- OP_LATENCY: one operation's latency in ns (`n`), `f` in `kind`, at its completion;

both of operations only: an op whose invocation names a `step` in its `extra`
(driftlab.harness.history.schema.STEP, a dual write's write to a derived store) is part of a
client's operation, as the runner counts them, not one of its own;
- SERIES_ROW: one finished row of the faults, offsets or marks series (`kind` names
  it), as JSON in `detail`. A fault's `planned_at` is the `at` of the schedule's window
  it opened (its start's `extra`), seconds after the `workload-start` mark or, for one
  anchored to an event, after that event (`after`); `planned_s` its planned duration;
  `idle` is true for a `when: busy` crash that struck its target not busy (its wait
  ran out: the crash cut no work short). A
  partition's `redeliveries` are the deliveries that repeat one of a message already
  delivered to that consumer, counted at the second one: the events and the time at
  which the duplicates checker finds a duplicate-delivery (the consumer's `attempt`
  cannot say so after a crash, when the new instance does not know what its
  predecessor received).

The pass's summary stage adds them up (driftlab.checkers.figures).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from driftlab.checkers.keyed.columns import OP_COUNT, OP_LATENCY, POSITION_COLUMN, SERIES_ROW
from driftlab.checkers.keyed.duck import cursor
from driftlab.checkers.keyed.masks import is_set, one_of
from driftlab.checkers.keyed.step import output_schema
from driftlab.checkers.series import COMPLETIONS, NS
from driftlab.harness.history.schema import (
    LOG_AUDIT,
    OBSERVER,
    STEP,
    EventType,
    FaultPhase,
    MsgAction,
    OpPhase,
)

_COMPLETIONS = ", ".join(f"'{phase}'" for phase in COMPLETIONS)

SERIES_COLUMNS = (
    "type",
    "time",
    "phase",
    "f",
    "op_id",
    "process",
    "kind",
    "target",
    "fault_id",
    "action",
    "consumer",
    "channel",
    "partition",
    "offset",
    "msg_id",
)
"""The history columns the series read as they are: the map side takes them from the
slice by row number (SERIES_ROWS gives the row numbers), dictionary-coded as read. As
DuckDB's output they were a third of a slice's routing CPU."""

SERIES_MASK = "_series"

SERIES_ROWS = f"""
SELECT {POSITION_COLUMN} - $first AS _i,
  CASE WHEN type = '{EventType.FAULT}' THEN error END AS error,
  CASE WHEN type = '{EventType.OP}' AND json_valid(extra)
    THEN json_extract_string(extra, '$.{STEP}') IS NOT NULL ELSE false END AS step,
  CASE WHEN type = '{EventType.FAULT}' AND phase = '{FaultPhase.START}' AND json_valid(extra)
    THEN TRY_CAST(json_extract_string(extra, '$.at') AS DOUBLE) END AS planned_at,
  CASE WHEN type = '{EventType.FAULT}' AND phase = '{FaultPhase.START}' AND json_valid(extra)
    THEN TRY_CAST(json_extract_string(extra, '$.duration') AS DOUBLE) END AS planned_s,
  CASE WHEN type = '{EventType.FAULT}' AND phase = '{FaultPhase.START}' AND json_valid(extra)
    THEN json_extract_string(extra, '$.after') END AS anchor,
  CASE WHEN type = '{EventType.FAULT}' AND phase = '{FaultPhase.START}' AND json_valid(extra)
    THEN json_extract_string(extra, '$.busy') = 'false' END AS idle,
  (CASE type WHEN '{EventType.OP}' THEN hash(op_id)
             WHEN '{EventType.FAULT}' THEN hash(fault_id)
             WHEN '{EventType.MSG}' THEN hash(consumer, channel, "partition")
             ELSE 0 END % $buckets)::INTEGER AS _b
FROM t
WHERE {SERIES_MASK}
"""
"""A slice's rows that feed the series (`series_mask`): their row number in the slice `t`
(`_i`, whose position is `$first`), the columns the series derive from `extra` and
`error`, and their bucket (`_b`); the map side orders them by bucket (in Arrow: DuckDB's
ORDER BY sorted the whole rows) and adds SERIES_COLUMNS."""


def series_mask(table: pa.Table) -> np.ndarray:
    """Which rows of a slice feed the series: operations, faults, marks and the
    consumers' offsets. SERIES_ROWS reads it as the column SERIES_MASK of `t`."""
    kind = table.column("type")
    return one_of(kind, EventType.OP, EventType.FAULT, EventType.MARK) | (
        one_of(kind, EventType.MSG)
        & one_of(table.column("action"), MsgAction.DELIVER, MsgAction.COMMIT)
        & is_set(table.column("consumer"))
    )


_BUCKET = f'CAST(floor(("time" - $t0) / ($bucket_s::BIGINT * {NS})) * $bucket_s AS BIGINT)'
_START = f"$t0 + {_BUCKET} * {NS}"
"""The start of an event's time bucket, in ns: the summary buckets it back to `t`."""

_OP_ROWS = f"type = '{EventType.OP}' AND process IS DISTINCT FROM '{OBSERVER}'"
_OPS = f"""(SELECT *, CASE WHEN op_id IS NULL THEN step
    ELSE op_id IN (SELECT op_id FROM s WHERE {_OP_ROWS} AND step AND op_id IS NOT NULL)
    END AS of_step
  FROM s WHERE {_OP_ROWS})"""
"""The share's op events, each with whether its op is a step of another (`of_step`):
only the invocation says so, and an op's events all land in one share. driftlab's own
samples of a pipeline's stores (OBSERVER) are no client's operations: left out, as the
runner leaves them out of its count. The steps' ops are looked up (a semi-join on the
few step rows), not spread by a window over op_id: that window sorted every op of the
share, and made a 5M pass's series three times as costly. Both of _ROWS's op queries
read them: a table once (MATERIALIZED), not the subquery twice."""

_SECONDS = """(SELECT consumer, channel, "partition", "time" FROM (
    SELECT *, row_number() OVER (PARTITION BY consumer, msg_id ORDER BY "time") AS nth
    FROM deliveries SEMI JOIN (
      SELECT consumer, msg_id FROM deliveries GROUP BY consumer, msg_id HAVING count(*) > 1
    ) USING (consumer, msg_id))
  WHERE nth = 2)"""
"""Each message's second delivery to a consumer (its first redelivery): only the messages
delivered more than once are numbered in time order, found by a hash aggregate. Numbering
every delivery by a window sorted them all: the costliest of the series at 5M events."""

_DELIVERIES = f"""(SELECT consumer, msg_id, channel, "partition", "time" FROM s
  WHERE type = '{EventType.MSG}' AND action = '{MsgAction.DELIVER}' AND msg_id IS NOT NULL
    AND consumer <> '{LOG_AUDIT}')"""

_ROWS = f"""
WITH ops AS MATERIALIZED {_OPS},
deliveries AS MATERIALIZED {_DELIVERIES},
seconds AS {_SECONDS}
SELECT '{OP_COUNT}' AS out, phase AS checker, f AS kind, ({_START}) AS "time",
  NULL::VARCHAR AS detail, count(*) AS n
FROM ops WHERE phase IN ({_COMPLETIONS}) AND NOT of_step
GROUP BY phase, f, {_BUCKET}
UNION ALL
SELECT '{OP_LATENCY}', NULL, f, "end", NULL, "end" - start FROM (
  SELECT any_value(f) AS f,
    min("time") FILTER (phase = '{OpPhase.INVOKE}') AS start,
    max("time") FILTER (phase IN ({_COMPLETIONS})) AS "end"
  FROM ops WHERE op_id IS NOT NULL AND NOT of_step GROUP BY op_id)
WHERE start IS NOT NULL AND "end" IS NOT NULL
UNION ALL
SELECT '{SERIES_ROW}', NULL, 'faults', NULL,
  CAST(json_object('fault_id', fault_id, 'kind', kind, 'target', target,
    'start', round((coalesce(start, stop) - $t0) / 1e9, 6),
    'stop', round((stop - $t0) / 1e9, 6), 'planned_at', planned_at,
    'planned_s', planned_s, 'after', anchor, 'idle', idle, 'error', error) AS VARCHAR),
  NULL
FROM (
  SELECT fault_id, any_value(kind) AS kind, any_value(target) AS target,
    any_value(planned_at) AS planned_at, any_value(planned_s) AS planned_s,
    any_value(anchor) AS anchor, bool_or(idle) AS idle, any_value(error) AS error,
    min("time") FILTER (phase = '{FaultPhase.START}') AS start,
    max("time") FILTER (phase = '{FaultPhase.STOP}') AS stop
  FROM s WHERE type = '{EventType.FAULT}' AND fault_id IS NOT NULL GROUP BY fault_id)
UNION ALL
SELECT '{SERIES_ROW}', NULL, 'offsets', NULL,
  CAST(json_object('consumer', consumer, 'channel', channel, 'partition', "partition", 't', t,
    'max_delivered', max_delivered, 'max_committed', max_committed,
    'redeliveries', redeliveries) AS VARCHAR),
  NULL
FROM (
  SELECT consumer, channel, "partition", {_BUCKET} AS t,
    max("offset") FILTER (action = '{MsgAction.DELIVER}') AS max_delivered,
    max("offset") FILTER (action = '{MsgAction.COMMIT}') AS max_committed,
    count(*) FILTER (again) AS redeliveries
  FROM (
    SELECT consumer, channel, "partition", "time", action, "offset", false AS again
    FROM s WHERE type = '{EventType.MSG}'
    UNION ALL
    SELECT consumer, channel, "partition", "time", NULL, NULL, true FROM seconds)
  GROUP BY consumer, channel, "partition", t)
UNION ALL
SELECT '{SERIES_ROW}', NULL, 'marks', NULL,
  CAST(json_object('kind', kind, 't', round(("time" - $t0) / 1e9, 6), 'consumer', consumer,
    'channel', channel) AS VARCHAR),
  NULL
FROM s WHERE type = '{EventType.MARK}'
"""


def series_rows(share: pa.Table, t0_ns: int, bucket_s: int) -> pa.Table:
    """A reduce partition's share of the series (SERIES_ROWS, without the bucket) as
    pass rows, for a history starting at `t0_ns` bucketed by `bucket_s` seconds."""
    with cursor() as con:
        con.register("s", share)
        query = _ROWS.replace("$t0", str(t0_ns)).replace("$bucket_s", str(bucket_s))
        found = con.sql(query).to_arrow_table()
    schema = output_schema()
    return pa.table(
        {
            f.name: found.column(f.name).cast(f.type)
            if f.name in found.column_names
            else pa.nulls(found.num_rows, f.type)
            for f in schema
        },
        schema=schema,
    )
