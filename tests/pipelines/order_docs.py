"""A user's consumer for the transactional pipeline tests: one JSON document per order
in Redis, rebuilt from the source's tables.

Every POLL seconds it reads the orders and their lines in one snapshot (REPEATABLE
READ) and makes Redis hold exactly their documents under PREFIX: a new or changed
document written, one whose order is gone deleted. A snapshot holds whole transactions
only, so the documents are always a state the source had: the correct consumer.

With TOTALS (a table name) it also keeps, in PostgreSQL, each order's total and line
count as a jsonb document, in one transaction per sync: a second view store.

BUG=torn plants what a view store's checkers must catch: the orders and the lines are
read in two statements, a moment apart, outside one snapshot, so a document may join
an order with lines of another transaction: a state the view never had.
"""

from __future__ import annotations

import json
import os
import time

import psycopg
import redis

DSN, REDIS_URL, SCHEMA, PREFIX = (os.environ[n] for n in ("DSN", "REDIS_URL", "SCHEMA", "PREFIX"))
POLL = float(os.environ.get("POLL", "0.1"))
BUG = os.environ.get("BUG", "")
TOTALS = os.environ.get("TOTALS", "")
DOCS = f"""
SELECT o.id, json_build_object('id', o.id, 'customer', o.customer, 'status', o.status,
  'lines', (SELECT coalesce(json_agg(json_build_object('line', l.line, 'amount', l.amount)
            ORDER BY l.line), '[]') FROM "{SCHEMA}".lines l WHERE l.order_id = o.id))::text
FROM "{SCHEMA}".orders o
"""


TORN_ORDERS = f'SELECT id, customer, status FROM "{SCHEMA}".orders'
TORN_LINES = f'SELECT order_id, line, amount::float8 FROM "{SCHEMA}".lines ORDER BY order_id, line'


def torn(pg: psycopg.Connection) -> dict[str, str]:
    """The documents of two reads a moment apart (BUG=torn)."""
    orders = pg.execute(TORN_ORDERS).fetchall()
    pg.commit()
    time.sleep(0.05)
    lines: dict[str, list[dict[str, object]]] = {}
    for order_id, line, amount in pg.execute(TORN_LINES).fetchall():
        lines.setdefault(order_id, []).append({"line": line, "amount": amount})
    pg.commit()
    return {
        i: json.dumps({"id": i, "customer": c, "status": s, "lines": lines.get(i, [])})
        for i, c, s in orders
    }


SUMS = f"""
SELECT o.id, json_build_object('total', coalesce(sum(l.amount), 0), 'lines', count(l.line))
FROM "{SCHEMA}".orders o LEFT JOIN "{SCHEMA}".lines l ON l.order_id = o.id GROUP BY o.id
"""


def totals(pg: psycopg.Connection) -> None:
    """Replace the totals table's rows with those of the source now, in one transaction."""
    with pg.transaction():
        pg.execute(f"CREATE TABLE IF NOT EXISTS {TOTALS} (id text PRIMARY KEY, doc jsonb)")
        pg.execute(f"DELETE FROM {TOTALS}")
        pg.execute(f"INSERT INTO {TOTALS} {SUMS}")


def sync(pg: psycopg.Connection, r: redis.Redis, held: dict[str, str]) -> None:
    """Make Redis hold the documents of the snapshot read now."""
    if BUG == "torn":
        docs = torn(pg)
    else:
        with pg.transaction():
            pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            docs = dict(pg.execute(DOCS).fetchall())
    pipe = r.pipeline(transaction=False)
    for key, doc in docs.items():
        if held.get(key) != doc:
            pipe.set(PREFIX + key, doc)
    for key in set(held) - set(docs):
        pipe.delete(PREFIX + key)
    pipe.execute()
    held.clear()
    held.update(docs)


def main() -> None:
    r = redis.Redis.from_url(REDIS_URL, password=os.environ.get("REDISCLI_AUTH"), socket_timeout=2)
    held = {
        k.decode()[len(PREFIX) :]: v.decode() for k in r.scan_iter(PREFIX + "*") if (v := r.get(k))
    }
    print("order-docs ready", flush=True)
    pg: psycopg.Connection | None = None
    while True:
        try:
            if pg is None or pg.closed:
                pg = psycopg.connect(DSN, connect_timeout=3)
            sync(pg, r, held)
            if TOTALS:
                totals(pg)
        except (psycopg.Error, redis.RedisError) as exc:
            print(f"retrying after: {exc}", flush=True)
            held.clear()  # unknown what was written: write everything again
            if pg is not None:
                pg.close()
        time.sleep(POLL)


if __name__ == "__main__":
    main()
