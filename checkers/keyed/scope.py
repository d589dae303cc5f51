"""The sieve's SQL for a history with view stores (docs/checkers.md, View stores).

A key `S/...` of a view store S is judged against S only, and S only on such keys:
the key route's rows (`k`) lose the derived stores' rows out of scope, and each row
carries its key's view store (`_view`, null for a plain key), so that the queries that
count stores per key (divergence, lost-write, and their chances) count those of its
scope. An arrival of a view key without a version shows the version of the state with
its value (the least, where values repeat: such a key is a suspect anyway, and the
least is what its chances need: that one exists). Without views the sieve's own SQL runs
unchanged.
"""

from __future__ import annotations

import pyarrow as pa
from duckdb import DuckDBPyConnection

from driftlab.checkers.keyed.facts import Facts
from driftlab.checkers.reference.common import WRITE_FS
from driftlab.harness.history.schema import OBSERVER, SOURCE_STORE

_WRITE_FS = ", ".join(f"'{f}'" for f in sorted(WRITE_FS))
_VIEWS = "(SELECT store FROM views)"
IN_SCOPE = f"CASE WHEN {{v}} IS NULL THEN {{s}} NOT IN {_VIEWS} ELSE {{s}} = {{v}} END"
"""driftlab.checkers.reference.common.in_scope of a derived store `{s}` on a key of view `{v}`."""

PREPARE = f"""
CREATE TEMP TABLE k AS SELECT * FROM (
  SELECT *, CASE WHEN contains(key, '/') AND split_part(key, '/', 1) IN {_VIEWS}
    THEN split_part(key, '/', 1) END AS _view
  FROM key_rows)
WHERE store IS NULL OR store = '{SOURCE_STORE}' OR {IN_SCOPE.format(v="_view", s="store")};
CREATE TEMP TABLE okw AS SELECT _g, _pos, time, writer, seq, version, value, process, _view
  FROM k
  WHERE type = 'op' AND store = '{SOURCE_STORE}' AND f IN ({_WRITE_FS}) AND phase = 'ok';
CREATE TEMP TABLE eff AS SELECT _g, _pos, time, writer, seq, version, value, store FROM k
  WHERE store IS NOT NULL AND store <> '{SOURCE_STORE}' AND (
    (type = 'msg' AND action = 'apply')
    OR (type = 'op' AND phase = 'ok' AND f IN ({_WRITE_FS})));
CREATE TEMP TABLE arrivals AS
SELECT a._g, a._pos, a.time, a.writer, a.seq,
  CASE WHEN a.version IS NULL AND a._view IS NOT NULL THEN s.version ELSE a.version END
    AS version,
  a.value, a.store
FROM (SELECT _g, _pos, time, writer, seq, version, value, store, _view FROM k
      WHERE store IS NOT NULL AND store <> '{SOURCE_STORE}' AND (
        (type = 'msg' AND action = 'apply')
        OR (type = 'op' AND phase = 'ok' AND f IN ({_WRITE_FS}))
        OR (type = 'op' AND process = '{OBSERVER}' AND f = 'read' AND phase = 'ok'
            AND value IS NOT NULL))) a
LEFT JOIN (SELECT _g, value, min(version) AS version FROM okw
           WHERE _view IS NOT NULL AND version IS NOT NULL GROUP BY _g, value) s
  ON s._g = a._g AND s.value = a.value;
CREATE TEMP TABLE reached AS SELECT DISTINCT _g, store, value FROM k
  WHERE store IS NOT NULL AND store <> '{SOURCE_STORE}' AND value IS NOT NULL AND (
    (type = 'msg' AND action IN ('apply', 'skip'))
    OR (type = 'op' AND phase = 'ok' AND f IN ({_WRITE_FS})));
"""
"""driftlab.checkers.keyed.sieve._PREPARE with the key route scoped and each arrival of a view
key given the version of its value."""

FINAL = """
CREATE TEMP TABLE fin AS
SELECT _g, store, value, _view FROM (
  SELECT _g, store, value, _view,
    row_number() OVER (PARTITION BY _g, store ORDER BY $DESC) AS n
  FROM k WHERE type = 'state' AND store IS NOT NULL)
WHERE n = 1"""
"""driftlab.checkers.keyed.sieve._FINAL, with each key's view store."""

LOST_WRITE = f"""
SELECT DISTINCT w._g FROM okw w CROSS JOIN effect_stores s
ANTI JOIN reached ON reached._g = w._g AND reached.store = s.store AND reached.value = w.value
WHERE {IN_SCOPE.format(v="w._view", s="s.store")}"""
"""driftlab.checkers.keyed.sieve._LOST_WRITE, each write against the effect stores of its scope."""

LOST_WRITE_CHANCES = f"""
SELECT count(*) FROM okw w CROSS JOIN effect_stores s
WHERE {IN_SCOPE.format(v="w._view", s="s.store")}"""
"""driftlab.checkers.keyed.coverage's lost-write chances, each write against its scope's stores."""

DIVERGENCE_CHANCES = f"""
SELECT coalesce(sum(CASE WHEN src THEN $derived ELSE n END), 0) FROM (
  SELECT _g, any_value(_view) AS _view, bool_or(store = '{SOURCE_STORE}') AS src,
    count(*) FILTER (store <> '{SOURCE_STORE}') AS n
  FROM (SELECT DISTINCT _g, store, _view FROM fin WHERE value IS NOT NULL) GROUP BY _g)"""
"""driftlab.checkers.keyed.coverage's divergence chances, `$derived` per key (derived_stores)."""

TORN = f"""
SELECT DISTINCT a._g FROM k a
WHERE a._view IS NOT NULL AND a.type = 'op' AND a.process = '{OBSERVER}' AND a.f = 'read'
  AND a.phase = 'ok' AND a.store IS NOT NULL AND a.store <> '{SOURCE_STORE}'
  AND a.value IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM k w WHERE w._g = a._g AND w.type = 'op'
                  AND w.store = '{SOURCE_STORE}' AND w.f IN ({_WRITE_FS})
                  AND w.phase IN ('ok', 'info') AND w.value = a.value)"""
"""View keys whose store was read holding a value no `ok` or `info` state of the view
has: a phantom the final states may not show (divergence._torn)."""

DIVERGENCE_GROUPS = (
    "groups AS (SELECT DISTINCT _g FROM fin)",
    "groups AS (SELECT DISTINCT _g, _view FROM fin)",
)
"""driftlab.checkers.keyed.sieve._DIVERGENCE's groups, and with their view store."""


def _quoted(names: list[str]) -> str:
    return ", ".join("'" + n.replace("'", "''") + "'" for n in names)


def derived_stores(facts: Facts, view: str) -> str:
    """The number of derived stores with final states that judge a key, as SQL of the
    key's view store column `view`: its view store's, or every other store's."""
    derived = facts.state_stores - {SOURCE_STORE}
    plain = len(derived - facts.views)
    read = sorted(derived & facts.views)
    held = f"{view} IN ({_quoted(read)})" if read else "false"
    return f"(CASE WHEN {view} IS NULL THEN {plain} WHEN {held} THEN 1 ELSE 0 END)"


def register(con: DuckDBPyConnection, facts: Facts) -> None:
    """The view stores as the table `views` the queries read."""
    con.register("views", pa.table({"store": pa.array(sorted(facts.views), pa.string())}))
