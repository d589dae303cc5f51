"""Each kind's chances in a partition of the keyed pass, in DuckDB: driftlab.checkers.coverage's
definitions over every group of the partition (the clean ones too), in the sieve's own
connection and over its tables (driftlab.checkers.keyed.sieve), so the pass reads nothing again.

tests/test_keyed_sieve.py holds these counts to driftlab.checkers.coverage on random histories.
"""

from __future__ import annotations

from collections import Counter

from duckdb import DuckDBPyConnection

from driftlab.checkers.keyed import scope
from driftlab.checkers.keyed.facts import Facts
from driftlab.checkers.kinds import (
    BY_NAME,
    CONTRADICTORY_ORDER,
    DUPLICATE_APPLY,
    DUPLICATE_DELIVERY,
    DUPLICATE_OFFSET,
    INCONSISTENT_OFFSET,
    INVARIANT_VIOLATION,
    LOST_MESSAGE,
    LOST_WRITE,
    NONMONOTONIC_SEND,
    PROJECTION_MISMATCH,
    REORDER_DELIVERY,
    RYW_VIOLATION,
    STALE_OVERWRITE,
)
from driftlab.checkers.reference.common import WRITE_FS
from driftlab.checkers.reference.eventsourcing import PROJECTION_PREFIX
from driftlab.harness.history.schema import LOG_AUDIT, SOURCE_STORE

_WRITE_FS = ", ".join(f"'{f}'" for f in sorted(WRITE_FS))
_CONSUMER = f"consumer IS NOT NULL AND consumer <> '{LOG_AUDIT}'"


def _followers(table: str, where: str, group: str) -> str:
    """How many rows `where` keeps follow an earlier one of their group."""
    return f"""SELECT coalesce(sum(n - 1), 0) FROM (
      SELECT count(*) AS n FROM {table} WHERE {where} GROUP BY _g, {group})"""


_MSG = "type = 'msg'"

QUERIES: dict[str, str] = {
    LOST_MESSAGE: f"""
    SELECT count(*) FROM (SELECT DISTINCT p._g, c.consumer FROM message_rows p
      JOIN consumers c ON c.channel = p.channel
      WHERE p.type = 'msg' AND p.action = 'produce' AND c.done
        AND c.consumer <> '{LOG_AUDIT}')""",
    LOST_WRITE: "SELECT count(*) * (SELECT count(*) FROM effect_stores) FROM okw",
    DUPLICATE_DELIVERY: (
        f"SELECT count(*) FROM receipts WHERE action = 'deliver' AND who <> '{LOG_AUDIT}'"
    ),
    DUPLICATE_APPLY: "SELECT count(*) FROM receipts WHERE action = 'apply'",
    DUPLICATE_OFFSET: "SELECT count(*) FROM channel_offsets",
    REORDER_DELIVERY: _followers(
        "k",
        f"type = 'msg' AND action = 'deliver' AND {_CONSUMER} AND version IS NOT NULL",
        "consumer, process",
    ),
    STALE_OVERWRITE: _followers("arrivals", "version IS NOT NULL", "store"),
    "polls": _followers(
        "partition_rows",
        f"""{_MSG} AND action = 'deliver' AND {_CONSUMER} AND "offset" IS NOT NULL""",
        "consumer, process",
    ),
    NONMONOTONIC_SEND: _followers(
        "partition_rows",
        f"""{_MSG} AND action = 'produce' AND "offset" IS NOT NULL AND process IS NOT NULL""",
        "process",
    ),
    INCONSISTENT_OFFSET: "SELECT count(*) FROM offset_messages",
    "divergence": f"""
    SELECT coalesce(sum(CASE WHEN src THEN $derived ELSE n END), 0) FROM (
      SELECT _g, bool_or(store = '{SOURCE_STORE}') AS src,
        count(*) FILTER (store <> '{SOURCE_STORE}') AS n
      FROM (SELECT DISTINCT _g, store FROM fin WHERE value IS NOT NULL) GROUP BY _g)""",
    RYW_VIOLATION: """
    WITH rd AS (SELECT * FROM k WHERE type = 'op' AND f = 'read' AND store IS NOT NULL
                  AND process IS NOT NULL AND op_id IS NOT NULL),
      inv AS (SELECT _g, process, op_id, min(time) AS t FROM rd WHERE phase = 'invoke'
              GROUP BY ALL),
      ok AS (SELECT rd._g, rd.process, inv.t FROM rd JOIN inv USING (_g, process, op_id)
             WHERE rd.phase = 'ok')
    SELECT count(*) FROM ok WHERE EXISTS (
      SELECT 1 FROM okw w WHERE w._g = ok._g AND w.process = ok.process
        AND w.version IS NOT NULL AND w.time <= ok.t)""",
    PROJECTION_MISMATCH: f"""
    SELECT coalesce(sum(CASE WHEN logged THEN $projections ELSE n END), 0) FROM (
      SELECT _g, bool_or(store IS NULL) AS logged, count(store) AS n FROM (
        SELECT DISTINCT _g, NULL AS store FROM log
        UNION ALL
        SELECT DISTINCT _g, store FROM fin
        WHERE value IS NOT NULL AND starts_with(store, '{PROJECTION_PREFIX}'))
      GROUP BY _g)""",
    INVARIANT_VIOLATION: "SELECT count(*) FROM log",
    CONTRADICTORY_ORDER: f"""
    WITH w AS (SELECT _g, value, version, f FROM k
               WHERE type = 'op' AND store = '{SOURCE_STORE}' AND f IN ({_WRITE_FS})
                 AND phase = 'ok' AND version IS NOT NULL)
    SELECT count(*) FROM (
      SELECT e._g, e.store FROM eff e JOIN w ON w._g = e._g AND w.value = e.value
      UNION
      SELECT e._g, e.store FROM eff e JOIN w ON w._g = e._g AND w.version = e.version
      WHERE e.value IS NULL AND w.value IS NULL AND w.f = 'delete')""",
}
"""The chances of each kind, or of the kinds counted under one name
(driftlab.checkers.kinds.Kind.counted_as), over the sieve's tables: each route's rows
(driftlab.checkers.keyed.sieve.ROUTE_TABLES; k, the key route's), okw, eff, arrivals,
fin, log, the message groups' receipts, channel_offsets and offset_messages (sieve's
_MESSAGE_GROUPS) and the facts' consumers and effect_stores. CONTRADICTORY_ORDER's two matches
are two equi-joins: one join on the key with either match as its condition paired every
effect of a key with every write of it (a third more CPU on a 5M pass's partition)."""

_SCOPED = {LOST_WRITE: scope.LOST_WRITE_CHANCES, "divergence": scope.DIVERGENCE_CHANCES}
"""The queries of QUERIES that count stores per key, for a history with view stores."""


def chances(con: DuckDBPyConnection, facts: Facts, kinds: tuple[str, ...]) -> Counter[str]:
    """Each of `kinds`' chances in the partition the sieve's connection `con` holds."""
    derived = facts.state_stores - {SOURCE_STORE}
    judged = {
        "divergence": SOURCE_STORE in facts.state_stores and bool(derived),
        PROJECTION_MISMATCH: any(s.startswith(PROJECTION_PREFIX) for s in facts.state_stores),
        INVARIANT_VIOLATION: facts.limits is not None,
    }
    projections = sum(1 for s in facts.state_stores if s.startswith(PROJECTION_PREFIX))
    counted: dict[str, int] = {}
    out: Counter[str] = Counter()
    for kind in kinds:
        name = BY_NAME[kind].counted_as
        if name not in counted:
            if not judged.get(name, True):
                counted[name] = 0
            else:
                query = QUERIES[name]
                if facts.views and name in _SCOPED:
                    query = _SCOPED[name].replace("$derived", scope.derived_stores(facts, "_view"))
                query = query.replace("$derived", str(len(derived))).replace(
                    "$projections", str(projections)
                )
                ((counted[name],),) = con.sql(query).fetchall()
        out[kind] = int(counted[name])
    return out
