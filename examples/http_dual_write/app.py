"""A small web application that writes its database and then its cache: a dual write.

    PUT /items/<key>  {"value": "..."}  -> {"version": n}
    GET /items        -> what the cache holds: {"<key>": {"value": "...", "version": n}}
    GET /health                         -> 200 once the cache is warm

Each write commits the row to PostgreSQL (its version bumped in the same statement),
then sets the Redis hash `<PREFIX><key>` (value, version) with a compare-and-set on the
version, so an older write that arrives late never overwrites a newer one. A cache
write that fails marks the key dirty; a repair loop copies dirty keys from the
database again. On start the application warms the cache from the database, which
also repairs what a crash between the two writes left behind.

BUG=1 plants the classic bugs: a plain overwrite (the later cache write wins, whatever
its version), no repair, no warm-up.

Environment: PGDSN (no password: libpq reads PGPASSWORD, which driftlab sets), REDIS_URL
and REDIS_PASSWORD, TABLE (schema.table), PREFIX, PORT, GAP_MS (work between the two
writes).
"""

from __future__ import annotations

import json
import os
import queue
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import redis

TABLE = os.environ["TABLE"]
PREFIX = os.environ["PREFIX"]
BUG = os.environ.get("BUG") == "1"
GAP_S = float(os.environ.get("GAP_MS", "0")) / 1000

UPSERT = f"""
INSERT INTO {TABLE} AS t (key, value, version) VALUES (%s, %s, 1)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = t.version + 1
RETURNING version"""

# Set the hash only if the cache holds no newer version of the key.
NEWER_WINS = """
local held = redis.call('HGET', KEYS[1], 'version')
if held and tonumber(held) >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'version', ARGV[2])
return 1"""

cache = redis.Redis.from_url(
    os.environ["REDIS_URL"],
    password=os.environ.get("REDIS_PASSWORD") or None,
    socket_timeout=1,
    socket_connect_timeout=1,
)
connections: queue.Queue[psycopg.Connection] = queue.Queue()
dirty: set[str] = set()
dirty_lock = threading.Lock()


def database() -> psycopg.Connection:
    try:
        return connections.get_nowait()
    except queue.Empty:
        return psycopg.connect(os.environ["PGDSN"], autocommit=True, connect_timeout=3)


def set_cache(key: str, value: str, version: int) -> None:
    if BUG:
        cache.hset(PREFIX + key, mapping={"value": value, "version": version})
    else:
        cache.eval(NEWER_WINS, 1, PREFIX + key, value, version)


def write(key: str, value: str) -> int:
    conn = database()
    try:
        (version,) = conn.execute(UPSERT, (key, value)).fetchone()
    except psycopg.Error:
        conn.close()
        raise
    connections.put(conn)
    time.sleep(random.uniform(0, GAP_S))
    try:
        set_cache(key, value, version)
    except redis.RedisError:
        if not BUG:
            with dirty_lock:
                dirty.add(key)
    return version


def copy_from_database(keys: list[str] | None) -> None:
    """Set the cache from the database's rows (all of them, or `keys`)."""
    conn = database()
    try:
        if keys is None:
            rows = conn.execute(f"SELECT key, value, version FROM {TABLE}").fetchall()
        else:
            rows = conn.execute(
                f"SELECT key, value, version FROM {TABLE} WHERE key = ANY(%s)", (keys,)
            ).fetchall()
    finally:
        conn.close()
    for key, value, version in rows:
        set_cache(key, value, version)


def repair_forever() -> None:
    while True:
        time.sleep(0.2)
        with dirty_lock:
            keys = list(dirty)
        if not keys:
            continue
        try:
            copy_from_database(keys)
        except (redis.RedisError, psycopg.Error):
            continue
        with dirty_lock:
            dirty.difference_update(keys)


def cached() -> dict[str, object]:
    """Every key the cache holds, with its value and version."""
    names = list(cache.scan_iter(match=PREFIX + "*", count=500))
    pipe = cache.pipeline(transaction=False)
    for name in names:
        pipe.hmget(name, ["value", "version"])
    out: dict[str, object] = {}
    for name, (value, version) in zip(names, pipe.execute(), strict=True):
        if value is not None:
            key = name.decode()[len(PREFIX) :]
            out[key] = {"value": value.decode(), "version": int(version)}
    return out


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/items":
            try:
                self.answer(200, cached())
            except redis.RedisError as exc:
                self.answer(503, {"error": str(exc)})
            return
        self.answer(200 if self.path == "/health" else 404, {})

    def do_PUT(self) -> None:
        if not self.path.startswith("/items/"):
            self.answer(404, {"error": "no such resource"})
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        try:
            version = write(self.path.removeprefix("/items/"), body["value"])
        except psycopg.Error as exc:
            self.answer(503, {"error": str(exc)})
            return
        self.answer(200, {"version": version})

    def answer(self, status: int, payload: dict[str, object]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: one line per request would drown the log."""


if __name__ == "__main__":
    if not BUG:
        while True:
            try:
                copy_from_database(None)
                break
            except (redis.RedisError, psycopg.Error) as exc:
                print(f"warming the cache: {exc}; retrying", flush=True)
                time.sleep(0.5)
        threading.Thread(target=repair_forever, daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler)
    print(f"listening on {server.server_address}", flush=True)
    server.serve_forever()
