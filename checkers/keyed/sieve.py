"""The sieve of the keyed pass: which groups of a partition need the reference at all.

Nearly every group of a real history is clean, and the plain-Python reference costs
microseconds per event whether a group is clean or not. The sieve asks, in a few
vectorized DuckDB queries over the partition's Arrow rows, whether each group could
make any reference checker report anything; only the groups it cannot clear (the
suspects) go through the reference, which stays the only judge of an anomaly and of its
evidence. What a clean group contributes to the figures (its lag samples, its
`unseen-message` count, its worst realtime lag) is computed here, exactly as the
reference computes it.

The tests of clearance are exact or err towards suspicion, never the other way: a
group is cleared only when the reference would find nothing in it. A key group is
cleared only when its writes are simple (every `ok` source write has its own value and
version, none is a delete, no `info` write lacks a value): the reference's by-value
lookups are then unambiguous, the lag is a join, and an `info` write counts only as
recovered or not. docs/analysis.md (The sieve) says more;
tests/test_keyed_sieve.py holds the sieve to the reference on random histories.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.checkers.keyed import scope
from driftlab.checkers.keyed.columns import GROUP_COLUMN, KEY, MESSAGE, PARTITION, ROUTE_COLUMN
from driftlab.checkers.keyed.coverage import chances
from driftlab.checkers.keyed.duck import cursor
from driftlab.checkers.keyed.facts import Facts
from driftlab.checkers.keyed.routes import runs
from driftlab.checkers.reference.common import WRITE_FS
from driftlab.checkers.reference.eventsourcing import PROJECTION_PREFIX
from driftlab.checkers.reference.reorder import RealtimeLag
from driftlab.harness.history.schema import LOG_AUDIT, OBSERVER, SOURCE_STORE

_WRITE_FS = ", ".join(f"'{f}'" for f in sorted(WRITE_FS))
_ORDER = (
    "{p}time {d}, {p}writer IS NOT NULL {d}, coalesce({p}writer, '') {d}, "
    "{p}seq IS NOT NULL {d}, coalesce({p}seq, 0) {d}, {p}_pos {d}"
)
"""driftlab.checkers.reference.common.order_key, ties in the history's order (the position)."""
_ORDERS = {
    "$ORDER": _ORDER.format(p="", d=""),
    "$E_ORDER": _ORDER.format(p="e.", d=""),
    "$DESC": _ORDER.format(p="", d="DESC"),
}
_POSITIONS = {"$ORDER": "_pos", "$E_ORDER": "e._pos", "$DESC": "_pos DESC"}
"""The same orders in a history in order (Facts.ordered): a window sorts one number, not
five keys with a string among them (a tenth of the sieve's CPU on a 5M pass)."""


def _expand(query: str, ordered: bool) -> str:
    """A query with its orders spelled out, for a history in order if `ordered`."""
    for name, order in (_POSITIONS if ordered else _ORDERS).items():
        query = query.replace(name, order)
    return query


_PREPARE = f"""
CREATE TEMP VIEW k AS SELECT * FROM key_rows;
CREATE TEMP TABLE okw AS SELECT _g, _pos, time, writer, seq, version, value, process FROM k
  WHERE type = 'op' AND store = '{SOURCE_STORE}' AND f IN ({_WRITE_FS}) AND phase = 'ok';
CREATE TEMP TABLE eff AS SELECT _g, _pos, time, writer, seq, version, value, store FROM k
  WHERE store IS NOT NULL AND store <> '{SOURCE_STORE}' AND (
    (type = 'msg' AND action = 'apply')
    OR (type = 'op' AND phase = 'ok' AND f IN ({_WRITE_FS})));
CREATE TEMP TABLE arrivals AS SELECT * FROM eff UNION ALL
  SELECT _g, _pos, time, writer, seq, version, value, store FROM k
  WHERE type = 'op' AND process = '{OBSERVER}' AND f = 'read' AND phase = 'ok'
    AND store IS NOT NULL AND store <> '{SOURCE_STORE}' AND value IS NOT NULL;
CREATE TEMP TABLE reached AS SELECT DISTINCT _g, store, value FROM (
  SELECT _g, store, value FROM eff WHERE value IS NOT NULL
  UNION ALL
  SELECT _g, store, value FROM k WHERE type = 'msg' AND action = 'skip'
    AND store IS NOT NULL AND store <> '{SOURCE_STORE}' AND value IS NOT NULL);
"""
"""The key route's rows (`k`), and of them: the `ok` source writes, the effects
(both narrowed and materialized: five queries join or scan them), the effects with
driftlab's observations of the stores it samples from outside (`arrivals`: the lag and
stale-overwrite judge both, driftlab.checkers.reference.common.is_arrival), and (lost.writes's
`reached`, the effects' values and the skipped ones) the values that reached a derived
store or were skipped there. Each of these that two queries or more read is a table: as
a view, each query computed it again."""

# Each query gives the groups (_g) of its route that the sieve cannot clear.
_KEY_SUSPECTS = {
    "complex writes": f"""
    SELECT _g FROM k
    WHERE type = 'op' AND store = '{SOURCE_STORE}' AND f IN ({_WRITE_FS})
    GROUP BY _g
    HAVING bool_or(phase = 'info' AND value IS NULL)
      OR bool_or(phase = 'ok' AND (value IS NULL OR version IS NULL))
      OR count(*) FILTER (phase = 'ok') <> count(DISTINCT value) FILTER (phase = 'ok')
      OR count(*) FILTER (phase = 'ok') <> count(DISTINCT version) FILTER (phase = 'ok')""",
    "reorder-delivery": """
    SELECT _g FROM (
      SELECT _g, version, max(version) OVER (
        PARTITION BY _g, consumer, process ORDER BY $ORDER
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS top
      FROM k WHERE type = 'msg' AND action = 'deliver' AND consumer IS NOT NULL
        AND version IS NOT NULL)
    WHERE version < top""",
    "stale-overwrite": """
    SELECT _g FROM (
      SELECT _g, version, max(version) OVER (
        PARTITION BY _g, store ORDER BY $ORDER
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS top
      FROM arrivals WHERE version IS NOT NULL)
    WHERE version < top""",
    "contradictory-order": """
    SELECT _g FROM (
      SELECT e._g, w.version, lag(w.version) OVER (PARTITION BY e._g, e.store ORDER BY $E_ORDER)
        AS before
      FROM eff e JOIN okw w ON w._g = e._g AND w.value = e.value)
    WHERE version < before""",
    "ryw-violation": """
    WITH rd AS (SELECT * FROM k WHERE type = 'op' AND f = 'read' AND store IS NOT NULL
                  AND process IS NOT NULL AND op_id IS NOT NULL),
      inv AS (SELECT _g, process, op_id, min(time) AS t FROM rd WHERE phase = 'invoke'
              GROUP BY ALL),
      ok AS (SELECT rd._g, rd._pos, rd.process, rd.value, inv.t FROM rd
             JOIN inv USING (_g, process, op_id) WHERE rd.phase = 'ok'),
      mine AS (SELECT ok._g, ok._pos, any_value(ok.value) AS value, max(w.version) AS v
               FROM ok JOIN okw w ON w._g = ok._g AND w.process = ok.process
                 AND w.time <= ok.t
               GROUP BY ok._g, ok._pos)
    SELECT mine._g FROM mine LEFT JOIN okw w ON w._g = mine._g AND w.value = mine.value
    WHERE mine.value IS NULL OR w.version < mine.v""",
}

_AS_INT = """CASE WHEN regexp_full_match({v}, '[+-]?[0-9]+')
  AND TRY_CAST({v} AS HUGEINT) BETWEEN -9223372036854775808 AND 9223372036854775807
  THEN TRY_CAST({v} AS HUGEINT) END"""
"""driftlab.checkers.reference.eventsourcing.as_int: None for what is not a 64-bit integer."""

_LOG = f"""
CREATE TEMP TABLE log AS
SELECT _g, version, time, writer, seq, _pos,
  coalesce({_AS_INT.format(v="value")}, 0) AS delta FROM k
WHERE type = 'msg' AND action = 'produce' AND channel IS NOT NULL
  AND (channel = 'events' OR starts_with(channel, 'events:'))"""
"""driftlab.checkers.reference.eventsourcing.is_log_event, with each event's delta."""

_FINAL = """
CREATE TEMP TABLE fin AS
SELECT _g, store, value FROM (
  SELECT _g, store, value, row_number() OVER (PARTITION BY _g, store ORDER BY $DESC) AS n
  FROM k WHERE type = 'state' AND store IS NOT NULL)
WHERE n = 1"""
"""Each key's last `state` per store (common.final_states; a null value: not held)."""

_PROJECTION = f"""
WITH fold AS (SELECT _g, sum(delta) AS total FROM log GROUP BY _g),
  held AS (SELECT _g, store, {_AS_INT.format(v="value")} AS n FROM fin
           WHERE value IS NOT NULL AND store IN (SELECT store FROM projections)),
  judged AS (SELECT _g, p.store FROM fold CROSS JOIN projections p
             UNION SELECT _g, store FROM held)
SELECT j._g FROM judged j LEFT JOIN held h USING (_g, store) LEFT JOIN fold f USING (_g)
WHERE h._g IS NULL OR h.n IS NULL OR h.n <> coalesce(f.total, 0)"""
"""Projection stores whose final value of a key is not the fold of its log
(eventsourcing._mismatches)."""

_INVARIANT = """
SELECT _g FROM (
  SELECT _g, delta, sum(delta) OVER (
    PARTITION BY _g ORDER BY version IS NOT NULL, coalesce(version, 0), $ORDER) AS total
  FROM log)
WHERE ($low IS NOT NULL AND total < $low AND delta < 0)
   OR ($high IS NOT NULL AND total > $high AND delta > 0)"""
"""Events that broke the invariant in version order (eventsourcing._violations)."""

_LOST_WRITE = """
SELECT DISTINCT w._g FROM okw w CROSS JOIN effect_stores s
ANTI JOIN reached ON reached._g = w._g AND reached.store = s.store AND reached.value = w.value"""

_RECOVERED = f"""
SELECT count(*) FROM k w
WHERE type = 'op' AND store = '{SOURCE_STORE}' AND f IN ({_WRITE_FS}) AND phase = 'info'
  AND _g NOT IN (SELECT _g FROM suspects WHERE _r = {KEY})
  AND EXISTS (SELECT 1 FROM reached WHERE reached._g = w._g AND reached.value = w.value)"""
"""The cleared keys' recovered writes (lost.writes): `info` source writes whose value
reached a derived store. A cleared key's `info` writes all carry a value."""

_DIVERGENCE = f"""
WITH src AS (SELECT _g, value FROM fin WHERE store = '{SOURCE_STORE}'),
  der AS (SELECT _g, store, value FROM fin WHERE store <> '{SOURCE_STORE}'),
  groups AS (SELECT DISTINCT _g FROM fin)
SELECT g._g FROM groups g LEFT JOIN src USING (_g)
WHERE (src.value IS NOT NULL
       AND (SELECT count(*) FROM der WHERE der._g = g._g AND der.value = src.value)
           < $derived)
   OR EXISTS (SELECT 1 FROM der WHERE der._g = g._g
              AND der.value IS DISTINCT FROM src.value)"""
"""Keys whose final states may diverge (divergence.check); a key with no final state in
any store has none to diverge."""

_LAG = f"""
SELECT e.store AS store, any_value(w.time) AS time,
  greatest(min(e.time) - any_value(w.time), 0) AS n
FROM arrivals e JOIN okw w ON w._g = e._g AND w.value = e.value
WHERE e._g NOT IN (SELECT _g FROM suspects WHERE _r = {KEY})
GROUP BY e._g, e.store, w.version"""

_MESSAGE_GROUPS = """
CREATE TEMP TABLE receipts AS
SELECT _g, action, CASE WHEN action = 'deliver' THEN consumer ELSE store END AS who,
  count(*) AS n
FROM message_rows WHERE type = 'msg' AND (
  (action = 'deliver' AND consumer IS NOT NULL) OR (action = 'apply' AND store IS NOT NULL))
GROUP BY ALL;
CREATE TEMP TABLE channel_offsets AS
SELECT _g, channel, "partition", count(DISTINCT "offset") AS n FROM message_rows
WHERE type = 'msg' AND action IN ('produce', 'deliver') AND channel IS NOT NULL
  AND "offset" IS NOT NULL
GROUP BY ALL;
CREATE TEMP TABLE offset_messages AS
SELECT _g, "offset", count(DISTINCT msg_id) AS n FROM partition_rows
WHERE type = 'msg' AND action IN ('produce', 'deliver') AND "offset" IS NOT NULL
  AND msg_id IS NOT NULL
GROUP BY ALL"""
"""Of each message, how often each consumer was given it and each store applied it
(`receipts`), and at how many offsets of each channel partition it was seen
(`channel_offsets`); of each offset of a channel partition, how many messages were seen
there (`offset_messages`). The sieve keeps the groups with more than one, and coverage
counts the rows (driftlab.checkers.keyed.coverage): one aggregate for both."""

_MESSAGE_SUSPECTS = {
    "duplicates": "SELECT _g FROM receipts WHERE n > 1",
    "duplicate-offset": "SELECT _g FROM channel_offsets WHERE n > 1",
    "lost-message": "SELECT _g FROM unmet WHERE done",
}

_UNMET = """
CREATE TEMP TABLE unmet AS
SELECT p._g, c.consumer, bool_or(c.done) AS done
FROM (SELECT DISTINCT _g, channel FROM message_rows
      WHERE type = 'msg' AND action = 'produce' AND channel IS NOT NULL) p
JOIN consumers c ON c.channel = p.channel
ANTI JOIN (SELECT DISTINCT _g, consumer FROM message_rows
           WHERE type = 'msg' AND action = 'deliver'
             AND consumer IS NOT NULL) d
  ON d._g = p._g AND d.consumer = c.consumer
GROUP BY p._g, c.consumer"""

_POLL_PAIRS = f"""
WITH d AS (
    SELECT _g, _pos, "offset", lag("offset") OVER w AS prev, lag(_pos) OVER w AS prev_pos
    FROM partition_rows WHERE type = 'msg' AND action = 'deliver'
      AND consumer IS NOT NULL AND consumer <> '{LOG_AUDIT}' AND "offset" IS NOT NULL
    WINDOW w AS (PARTITION BY _g, consumer, process ORDER BY $ORDER)),
  known AS (SELECT DISTINCT _g, "offset" FROM partition_rows WHERE type = 'msg'
            AND action IN ('produce', 'deliver') AND "offset" IS NOT NULL)
SELECT d.prev_pos AS prev, d._pos AS pos, k."offset" AS above
FROM d ASOF LEFT JOIN known k ON k._g = d._g AND k."offset" > d.prev
WHERE d."offset" <= d.prev OR k."offset" < d."offset" """
"""Each delivery that may be a nonmonotonic-poll or a poll-skip (reorder.polls): its
position, its consumer instance's previous delivery's, and the lowest offset known above
that one (any observation's, reorder.polls's `known`)."""

_SEND_PAIRS = """
SELECT prev_pos AS prev, _pos AS pos FROM (
  SELECT _pos, "offset", lag("offset") OVER w AS prev, lag(_pos) OVER w AS prev_pos
  FROM partition_rows WHERE type = 'msg' AND action = 'produce'
    AND process IS NOT NULL AND "offset" IS NOT NULL
  WINDOW w AS (PARTITION BY _g, process ORDER BY $ORDER))
WHERE "offset" < prev"""
"""Each produce that is a nonmonotonic-send (reorder.sends) and its producer's previous
one there."""

_OFFSET_ROWS = """
WITH bad AS (SELECT _g, "offset" FROM offset_messages WHERE n > 1)
SELECT o._g || chr(0) || o."offset" AS at, o._pos AS pos FROM partition_rows o
JOIN bad USING (_g, "offset")
WHERE o.type = 'msg' AND o.action IN ('produce', 'deliver') AND o.msg_id IS NOT NULL"""
"""The events at each offset that holds two messages (reorder.inconsistent_offsets), by
where (`at`)."""

_REALTIME = f"""
WITH seen AS (
    SELECT _g, "offset", min("time") AS t FROM partition_rows
    WHERE type = 'msg' AND action IN ('produce', 'deliver')
      AND "offset" IS NOT NULL
    GROUP BY _g, "offset"),
  known AS (SELECT _g, "offset", min(t) OVER (
              PARTITION BY _g ORDER BY "offset" DESC ROWS UNBOUNDED PRECEDING) AS since
            FROM seen),
  polls AS (
    SELECT _g, any_value(channel) AS channel, any_value("partition") AS "partition",
      consumer, process, "time", max("offset") AS top
    FROM partition_rows WHERE type = 'msg' AND action = 'deliver'
      AND consumer IS NOT NULL AND consumer <> '{LOG_AUDIT}' AND "offset" IS NOT NULL
    GROUP BY _g, consumer, process, "time"),
  reached AS (
    SELECT *, max(top) OVER (PARTITION BY _g, consumer, process ORDER BY "time"
                             ROWS UNBOUNDED PRECEDING) AS h
    FROM polls),
  lags AS (
    SELECT p.*, greatest(coalesce(p."time" - k.since, 0), 0) AS lag_ns
    FROM reached p ASOF LEFT JOIN known k ON k._g = p._g AND k."offset" >= p.h + 1)
SELECT channel, "partition", consumer, process, "time", lag_ns FROM (
  SELECT *, row_number() OVER (PARTITION BY _g ORDER BY "time", consumer,
                               process NULLS FIRST) AS n
  FROM lags SEMI JOIN (SELECT _g, max(lag_ns) AS lag_ns FROM lags GROUP BY _g)
    USING (_g, lag_ns))
WHERE n = 1"""
"""Each channel partition's worst poll (reorder.worst_realtime_lags): the highest offset
its instance had read after each poll, and the earliest observation of an offset above
it. The ties of the largest lag alone are ordered, not every poll (a sixth less CPU)."""


SIEVE_QUERIES: dict[str, str] = {
    **_KEY_SUSPECTS,
    "lost-write": _LOST_WRITE,
    "divergence": _DIVERGENCE,
    "projection-mismatch": _PROJECTION,
    "invariant-violation": _INVARIANT,
    **_MESSAGE_SUSPECTS,
    "polls": _POLL_PAIRS,
    "sends": _SEND_PAIRS,
    "offsets": _OFFSET_ROWS,
}
"""Every query that keeps a group (or a pair, or an offset) for the reference to judge,
by the name driftlab.checkers.kinds.TABLE gives each kind's (`Kind.sieve`)."""


@dataclass
class Narrowed:
    """The few events of the channel partitions that the partition checks must judge:
    those checks look at pairs of events and at single offsets, so a suspect partition
    needs only its suspect pairs and offsets judged, not its whole log."""

    polls: list[tuple[int, int, int | None]]
    """(previous, delivery, lowest offset known above the previous one) of each delivery
    that may be a nonmonotonic-poll or a poll-skip, by position"""
    sends: list[tuple[int, int]]
    """(previous, produce) of each nonmonotonic-send, by position"""
    offsets: list[tuple[str, int]]
    """(where, position) of every event at an offset that holds two messages"""

    def positions(self) -> set[int]:
        """Every position the pairs and offsets name."""
        return {p for pair in (*self.polls, *self.sends) for p in pair[:2]} | {
            p for _, p in self.offsets
        }


@dataclass
class Sieved:
    """What the sieve made of one partition's routed rows."""

    suspects: pa.Table
    """(_r, _g) of the KEY and MESSAGE groups the reference must judge"""
    narrowed: Narrowed
    """what of the channel partitions the reference must judge"""
    lags: pa.Table
    """(store, time, n) of the cleared key groups' writes: staleness.lag_rows's
    (store, ok time, lag in ns)"""
    unseen: int
    """unseen-message count of the cleared message groups"""
    recovered: int
    """recovered-write count of the cleared key groups"""
    realtime: list[RealtimeLag]
    """the worst realtime lag of each channel partition with a poll"""
    chances: Counter[str] = field(default_factory=Counter)
    """each kind's chances in every group of the partition (driftlab.checkers.keyed.coverage)"""


ROUTE_TABLES = {"key_rows": KEY, "message_rows": MESSAGE, "partition_rows": PARTITION}
"""The tables of a partition's routed rows the queries read, by the route they hold."""


def _consumers(facts: Facts) -> pa.Table:
    """(consumer, channel, done) of every channel a consumer consumes (lost.messages)."""
    rows: dict[str, list] = {"consumer": [], "channel": [], "done": []}
    c = facts.consumers
    for consumer in c.delivered_on.keys() | c.marked.keys():
        delivered = c.delivered_on.get(consumer, frozenset())
        marked = c.marked.get(consumer, frozenset())
        done = marked | (delivered if consumer in c.done_everywhere else frozenset())
        for channel in delivered | marked:
            rows["consumer"].append(consumer)
            rows["channel"].append(channel)
            rows["done"].append(channel in done)
    return pa.table(
        rows,
        schema=pa.schema(
            [("consumer", pa.string()), ("channel", pa.string()), ("done", pa.bool_())]
        ),
    )


def sieve(routes: dict[int, pa.Table], facts: Facts) -> Sieved:
    """The suspects of a partition's routed rows (history columns plus route, group and
    position), by route (driftlab.checkers.keyed.routes.by_route), and what its cleared
    groups contribute."""
    # The queries group and join on the group some fifteen times: on a number, not the
    # group's name, each costs about half. No query joins two routes' groups: each
    # route's are numbered on their own.
    names: dict[int, pa.Array] = {}
    with cursor() as con:
        # A table per route: a query of one route's groups scans its rows only (DuckDB
        # filters a registered Arrow table by copying what it keeps, on every scan).
        for name, route in ROUTE_TABLES.items():
            rows = routes[route]
            groups = pc.dictionary_encode(rows[GROUP_COLUMN].combine_chunks())
            names[route] = groups.dictionary
            column = rows.schema.get_field_index(GROUP_COLUMN)
            con.register(name, rows.set_column(column, GROUP_COLUMN, groups.indices))
        con.register("consumers", _consumers(facts))
        stores = sorted(facts.writes.effect_stores) if facts.writes.quiesced else []
        con.register("effect_stores", pa.table({"store": pa.array(stores, pa.string())}))
        if facts.views:
            scope.register(con, facts)
        con.execute(scope.PREPARE if facts.views else _PREPARE)
        con.execute(_expand(_LOG, facts.ordered))
        con.execute(_expand(scope.FINAL if facts.views else _FINAL, facts.ordered))
        con.execute(_UNMET)
        con.execute(_MESSAGE_GROUPS)
        queries = [f"SELECT {KEY} AS _r, _g FROM ({q})" for q in _KEY_SUSPECTS.values()]
        if facts.limits_error is not None:
            queries.append(f"SELECT {KEY} AS _r, _g FROM k")  # the checker fails as a whole
        if stores:
            lost_write = scope.LOST_WRITE if facts.views else _LOST_WRITE
            queries.append(f"SELECT {KEY} AS _r, _g FROM ({lost_write})")
        projections = sorted(s for s in facts.state_stores if s.startswith(PROJECTION_PREFIX))
        if projections:
            con.register("projections", pa.table({"store": pa.array(projections, pa.string())}))
            queries.append(f"SELECT {KEY} AS _r, _g FROM ({_PROJECTION})")
        if facts.limits is not None:
            low, high = (
                "NULL" if b is None else str(b) for b in (facts.limits.low, facts.limits.high)
            )
            invariant = _INVARIANT.replace("$low", low).replace("$high", high)
            queries.append(f"SELECT {KEY} AS _r, _g FROM ({invariant})")
        derived = facts.state_stores - {SOURCE_STORE}
        if SOURCE_STORE in facts.state_stores and derived:
            if facts.views:
                divergence = _DIVERGENCE.replace(*scope.DIVERGENCE_GROUPS).replace(
                    "$derived", scope.derived_stores(facts, "g._view")
                )
            else:
                divergence = _DIVERGENCE.replace("$derived", str(len(derived)))
            queries.append(f"SELECT {KEY} AS _r, _g FROM ({divergence})")
            if facts.views:
                queries.append(f"SELECT {KEY} AS _r, _g FROM ({scope.TORN})")
        queries += [f"SELECT {MESSAGE} AS _r, _g FROM ({q})" for q in _MESSAGE_SUSPECTS.values()]
        suspected = "CREATE TEMP TABLE suspects AS " + " UNION ".join(queries)
        con.execute(_expand(suspected, facts.ordered))
        found = con.sql("SELECT _r, _g FROM suspects ORDER BY _r").to_arrow_table()
        named = [
            names[run["_r"][0].as_py()].take(run["_g"].combine_chunks()) for run in runs(found)
        ]
        suspects = pa.table(
            {ROUTE_COLUMN: found["_r"], GROUP_COLUMN: pa.chunked_array(named, pa.string())}
        )
        lags = con.sql(_LAG).to_arrow_table()
        (unseen,) = con.sql(
            f"SELECT count(*) FROM unmet WHERE NOT done "
            f"AND _g NOT IN (SELECT _g FROM suspects WHERE _r = {MESSAGE})"
        ).fetchall()[0]
        ((recovered,),) = con.sql(_RECOVERED).fetchall()
        realtime = [RealtimeLag(*row) for row in con.sql(_REALTIME).fetchall()]
        narrowed = Narrowed(
            con.sql(_expand(_POLL_PAIRS, facts.ordered)).fetchall(),
            con.sql(_expand(_SEND_PAIRS, facts.ordered)).fetchall(),
            con.sql(_OFFSET_ROWS).fetchall(),
        )
        found_chances = chances(con, facts, ALL_KINDS)
        return Sieved(suspects, narrowed, lags, unseen, recovered, realtime, found_chances)
