"""The checker suite of docs/checkers.md as hand-written DuckDB SQL, for the benchmark.

A yardstick, not a checker of the lab: it produces the identity columns of every anomaly
row (checker, kind, store, key, consumer, time) without `detail` and `evidence`, so it
does less work than the Spark checkers. Its counts must match the planted ones.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

# Views over the history `h`: the vocabulary of docs/checkers.md.
_VIEWS = """
CREATE OR REPLACE VIEW source_writes AS
  SELECT * FROM h WHERE type = 'op' AND store = 'source'
    AND f IN ('write', 'delete', 'increment');
CREATE OR REPLACE VIEW effects AS
  SELECT * FROM h WHERE store IS NOT NULL AND store <> 'source' AND (
    (type = 'msg' AND action = 'apply')
    OR (type = 'op' AND phase = 'ok' AND f IN ('write', 'delete', 'increment')));
CREATE OR REPLACE VIEW delivers AS
  SELECT * FROM h WHERE type = 'msg' AND action = 'deliver';
CREATE OR REPLACE VIEW finals AS
  SELECT store, key, value FROM (
    SELECT store, key, value, row_number() OVER (
      PARTITION BY store, key ORDER BY time DESC, writer DESC, seq DESC) AS rn
    FROM h WHERE type = 'state' AND store IS NOT NULL AND key IS NOT NULL)
  WHERE rn = 1 AND value IS NOT NULL;
"""


def _below_seen(kind: str, columns: str, per: str, rows: str) -> str:
    """The reorder `kind`: a row of the view `rows` whose version is below the highest
    one `per` (a consumer, a store) had already seen for its key; `columns` are the
    identity's store, key and consumer."""
    return f"""
    SELECT 'reorder', '{kind}', {columns}, time FROM (
      SELECT *, max(version) OVER (PARTITION BY {per}, key ORDER BY time, writer, seq
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS seen
      FROM {rows} WHERE version IS NOT NULL AND key IS NOT NULL)
    WHERE version < seen"""


_CHECKS: dict[str, str] = {
    "lost-message": """
    WITH prod AS (SELECT channel, msg_id, min(time) AS time FROM h
                  WHERE type = 'msg' AND action = 'produce' AND msg_id IS NOT NULL
                  GROUP BY channel, msg_id),
         done AS (SELECT DISTINCT consumer, channel FROM h
                  WHERE type = 'mark' AND kind = 'consumer-done'),
         got AS (SELECT DISTINCT consumer, msg_id FROM delivers)
    SELECT 'lost', 'lost-message', NULL, NULL, d.consumer, p.time
    FROM prod p JOIN done d USING (channel)
    ANTI JOIN got g ON g.consumer = d.consumer AND g.msg_id = p.msg_id""",
    "lost-write": """
    WITH stores AS (SELECT DISTINCT store FROM effects),
         reached AS (SELECT DISTINCT store, key, value FROM effects
                     UNION SELECT DISTINCT store, key, value FROM h
                     WHERE type = 'msg' AND action = 'skip' AND store IS NOT NULL),
         w AS (SELECT key, value, time FROM source_writes WHERE phase = 'ok')
    SELECT 'lost', 'lost-write', s.store, w.key, NULL, w.time
    FROM w CROSS JOIN stores s
    ANTI JOIN reached r ON r.store = s.store AND r.key = w.key
      AND r.value IS NOT DISTINCT FROM w.value
    WHERE EXISTS (SELECT 1 FROM h WHERE type = 'mark' AND kind = 'quiesced')""",
    "duplicate-delivery": """
    SELECT 'duplicates', 'duplicate-delivery', NULL, any_value(key), consumer, max(time)
    FROM delivers WHERE msg_id IS NOT NULL AND consumer IS NOT NULL
    GROUP BY consumer, msg_id HAVING count(*) > 1""",
    "duplicate-apply": """
    SELECT 'duplicates', 'duplicate-apply', store, any_value(key), NULL, max(time)
    FROM h WHERE type = 'msg' AND action = 'apply' AND msg_id IS NOT NULL
      AND store IS NOT NULL
    GROUP BY store, msg_id HAVING count(*) > 1""",
    "reorder-delivery": _below_seen(
        "reorder-delivery", "NULL, key, consumer", "consumer", "delivers"
    ),
    "stale-overwrite": _below_seen("stale-overwrite", "store, key, NULL", "store", "effects"),
    "nonmonotonic-poll": """
    SELECT 'reorder', 'nonmonotonic-poll', NULL, key, consumer, time FROM (
      SELECT *, lag("offset") OVER (PARTITION BY consumer, process, channel, "partition"
        ORDER BY time, writer, seq) AS prev
      FROM delivers WHERE "offset" IS NOT NULL)
    WHERE "offset" <= prev""",
    "poll-skip": """
    WITH d AS (
      SELECT *, lag("offset") OVER (PARTITION BY consumer, process, channel, "partition"
        ORDER BY time, writer, seq) AS prev
      FROM delivers WHERE "offset" IS NOT NULL),
    gaps AS (SELECT * FROM d WHERE "offset" > prev + 1),
    held AS (SELECT DISTINCT channel, "partition", "offset" FROM h
             WHERE type = 'msg' AND action IN ('produce', 'deliver') AND "offset" IS NOT NULL)
    SELECT 'reorder', 'poll-skip', NULL, g.key, g.consumer, g.time FROM gaps g
    SEMI JOIN held p ON p.channel = g.channel AND p."partition" = g."partition"
      AND p."offset" > g.prev AND p."offset" < g."offset"
    """,
    "nonmonotonic-send": """
    SELECT 'reorder', 'nonmonotonic-send', NULL, key, NULL, time FROM (
      SELECT *, lag("offset") OVER (PARTITION BY process, channel, "partition"
        ORDER BY time, writer, seq) AS prev
      FROM h WHERE type = 'msg' AND action = 'produce' AND process IS NOT NULL
        AND channel IS NOT NULL AND "offset" IS NOT NULL)
    WHERE "offset" < prev""",
    "duplicate-offset": """
    SELECT 'duplicates', 'duplicate-offset', NULL, any_value(key), NULL, min(time) FROM (
      SELECT *, first_value("offset") OVER (PARTITION BY msg_id, channel, "partition"
        ORDER BY time, writer, seq) AS first_offset
      FROM h WHERE type = 'msg' AND action IN ('produce', 'deliver') AND msg_id IS NOT NULL
        AND channel IS NOT NULL AND "offset" IS NOT NULL)
    WHERE "offset" <> first_offset
    GROUP BY msg_id, channel, "partition" """,
    "inconsistent-offset": """
    SELECT 'reorder', 'inconsistent-offset', NULL, NULL, NULL, min(time)
    FROM h WHERE type = 'msg' AND action IN ('produce', 'deliver')
      AND "offset" IS NOT NULL AND msg_id IS NOT NULL
    GROUP BY channel, "partition", "offset" HAVING count(DISTINCT msg_id) > 1""",
    "divergence": """
    WITH src AS (SELECT key, value AS src_value FROM finals WHERE store = 'source'),
         stores AS (SELECT DISTINCT store FROM h WHERE type = 'state' AND store IS NOT NULL
                    AND store <> 'source'
                    AND EXISTS (SELECT 1 FROM h WHERE type = 'state' AND store = 'source')),
         der AS (SELECT f.* FROM finals f SEMI JOIN stores s USING (store)),
         pairs AS (SELECT s.store, src.key FROM stores s CROSS JOIN src
                   UNION SELECT store, key FROM der),
         committed AS (SELECT DISTINCT key, value FROM source_writes
                       WHERE phase IN ('ok', 'info') AND value IS NOT NULL),
         cmp AS (SELECT p.store, p.key, d.value, src.src_value FROM pairs p
                 LEFT JOIN der d ON d.store = p.store AND d.key = p.key
                 LEFT JOIN src ON src.key = p.key
                 WHERE d.value IS NULL OR src.src_value IS NULL
                   OR d.value <> src.src_value)
    SELECT 'divergence',
           CASE WHEN cmp.value IS NULL THEN 'missing'
                WHEN cmp.src_value IS NULL THEN 'extra'
                WHEN c.key IS NOT NULL THEN 'stale' ELSE 'phantom' END,
           cmp.store, cmp.key, NULL, NULL::BIGINT
    FROM cmp LEFT JOIN committed c ON c.key = cmp.key AND c.value = cmp.value""",
    "ryw-violation": """
    WITH inv AS (SELECT op_id, min(time) AS inv_time FROM h
                 WHERE type = 'op' AND phase = 'invoke' AND f = 'read' GROUP BY op_id),
         reads AS (SELECT r.*, i.inv_time FROM h r JOIN inv i USING (op_id)
                   WHERE r.type = 'op' AND r.phase = 'ok' AND r.f = 'read'),
         own AS (SELECT process, key, value, version, f, time FROM source_writes
                 WHERE phase = 'ok' AND version IS NOT NULL),
         versions AS (SELECT key, value, max(version) AS version FROM own
                      WHERE value IS NOT NULL GROUP BY key, value),
         j AS (SELECT r.*, o.version AS own_version, o.f AS own_f FROM reads r
               ASOF JOIN own o ON r.process = o.process AND r.key = o.key
                 AND r.inv_time > o.time)
    SELECT 'staleness', 'ryw-violation', j.store, j.key, NULL, j.time
    FROM j LEFT JOIN versions v ON v.key = j.key AND v.value = j.value
    WHERE (j.value IS NULL AND j.own_f <> 'delete')
       OR (j.value IS NOT NULL AND v.version < j.own_version)""",
    "projection-mismatch": """
    WITH ev AS (SELECT key, sum(CAST(value AS BIGINT)) AS fold FROM h
                WHERE type = 'msg' AND action = 'produce'
                  AND (channel = 'events' OR channel LIKE 'events:%') GROUP BY key)
    SELECT 'eventsourcing', 'projection-mismatch', f.store, f.key, NULL, NULL::BIGINT
    FROM finals f JOIN ev USING (key)
    WHERE f.store LIKE 'projection:%' AND f.value <> CAST(ev.fold AS VARCHAR)""",
    "invariant-violation": """
    WITH bounds AS (SELECT
          max(CAST(json_extract(extra, '$.params.invariant.min') AS BIGINT)) AS lo,
          max(CAST(json_extract(extra, '$.params.invariant.max') AS BIGINT)) AS hi
        FROM h WHERE type = 'header'),
         run AS (SELECT key, time, sum(CAST(value AS BIGINT)) OVER (
                   PARTITION BY key ORDER BY version, time, writer, seq) AS total
                 FROM h WHERE type = 'msg' AND action = 'produce'
                   AND (channel = 'events' OR channel LIKE 'events:%'))
    SELECT 'eventsourcing', 'invariant-violation', NULL, key, NULL, time
    FROM run, bounds WHERE total < lo OR total > hi""",
    "contradictory-order": """
    WITH versions AS (SELECT key, value, max(version) AS version FROM source_writes
                      WHERE phase = 'ok' AND version IS NOT NULL AND value IS NOT NULL
                      GROUP BY key, value),
         e AS (SELECT e.store, e.key, e.time, v.version, lag(v.version) OVER (
                 PARTITION BY e.store, e.key ORDER BY e.time, e.writer, e.seq) AS prev
               FROM effects e JOIN versions v ON v.key = e.key AND v.value = e.value)
    SELECT 'graph', 'contradictory-order', store, key, NULL, min(time)
    FROM e WHERE version < prev GROUP BY store, key""",
}


_REALTIME_LAG = """
WITH seen AS (SELECT channel, "partition", "offset", min(time) AS t FROM h
              WHERE type = 'msg' AND action IN ('produce', 'deliver') AND channel IS NOT NULL
                AND "offset" IS NOT NULL
              GROUP BY ALL),
  known AS (SELECT *, min(t) OVER (PARTITION BY channel, "partition" ORDER BY "offset" DESC
                                   ROWS UNBOUNDED PRECEDING) AS since FROM seen),
  polls AS (SELECT channel, "partition", consumer, process, time, max("offset") AS top
            FROM delivers WHERE consumer IS NOT NULL AND consumer <> 'log-audit'
              AND channel IS NOT NULL AND "offset" IS NOT NULL
            GROUP BY ALL),
  reached AS (SELECT *, max(top) OVER (PARTITION BY channel, "partition", consumer, process
                                       ORDER BY time ROWS UNBOUNDED PRECEDING) AS top_so_far
              FROM polls)
SELECT p.channel, p."partition", max(greatest(coalesce(p.time - k.since, 0), 0)) AS lag_ns
FROM reached p ASOF LEFT JOIN known k ON k.channel = p.channel
  AND k."partition" IS NOT DISTINCT FROM p."partition" AND k."offset" >= p.top_so_far + 1
GROUP BY ALL
"""
"""The worst realtime lag per channel partition (docs/checkers.md), which the keyed
pass computes beside the anomalies: the yardstick does the same work."""


def run_checks(history: Path, out: Path, threads: int | None = None) -> dict[str, int]:
    """Run every check over `history` (a history.parquet), write the rows to `out`
    (Parquet) and the worst realtime lag per channel partition beside it
    (`<out>-realtime-lag.parquet`), and return the counts per kind."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    con.execute(f"CREATE VIEW h AS SELECT * FROM read_parquet('{history}')")
    con.execute(_VIEWS)
    union = "\nUNION ALL\n".join(f"({q})" for q in _CHECKS.values())
    con.execute(
        f"COPY (SELECT * FROM ({union}) AS a(checker, kind, store, key, consumer, time)) "
        f"TO '{out}' (FORMAT parquet)"
    )
    realtime = out.with_name(f"{out.stem}-realtime-lag.parquet")
    con.execute(f"COPY ({_REALTIME_LAG}) TO '{realtime}' (FORMAT parquet)")
    rows = con.execute(f"SELECT kind, count(*) FROM read_parquet('{out}') GROUP BY kind").fetchall()
    con.close()
    return {kind: int(n) for kind, n in rows}
