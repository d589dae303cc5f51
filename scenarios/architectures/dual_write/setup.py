"""Dual write: the application writes PostgreSQL, then a Redis cache and a search index.

This is Figure 11-4 of DDIA: with no coordination between the writes, two clients
writing one key can reach the source in one order and a derived store in the other,
leaving them permanently inconsistent although no write failed (claim C1); a crash or an
unreachable store between the writes leaves one write done and the other not (C2).

Parameters (scenario `setup.params`):

- `derived`: the derived stores in write order, any of `cache`, `search`
  (default both).
- `mode`: `concurrent` (default) or `sequential`: a process-wide lock around the whole
  dual write, the control case in which the race cannot happen.
- `on_failure`: what the application does when a derived write fails: `ignore`
  (default: carry on), `retry` (retry with backoff up to `retries` times), `invalidate`
  (remember the key and delete it from that store as soon as the store answers again,
  so a stale value becomes a missing one).
- `search`: `direct` (default: the application writes the index itself; the index
  refreshes every `refresh_ms`, like Elasticsearch's refresh interval) or `indexer`
  (the explicit asynchronous view: the application hands the change to an in-process
  indexer queue whose worker applies batches every `refresh_ms`, recorded as `msg`
  events, so the view's lag is measured).
- `gap_ms`: the application's own work between the source write and the derived
  writes (rendering the cached entry, say): a think time drawn uniformly from
  `[0, gap_ms]` per write, seeded per client (default 0).

Each application instance (a workload client) is an OS process of its own
(driftlab.scenarios.architectures.dual_write.app) holding its PostgreSQL and Redis connections,
driven
by its client thread, which records the history: an `app-crash` fault SIGKILLs it
between the source write and the derived writes (`kill_app`).

The source is `<namespace>.items(key, value, version)`: every write (and delete, a
tombstone with `value` NULL) increments the key's `version` in the same statement, so
`ok` ops carry the source's commit order per key.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
import time
from typing import Any

from psycopg import sql

from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.setups.app_process import AppInstances, AppProcess
from driftlab.harness.lab.setups.base import Setup, SetupContext
from driftlab.harness.lab.setups.connect import endpoint, pg_conninfo
from driftlab.harness.lab.setups.stores import (
    CACHE,
    SEARCH,
    SearchIndex,
    State,
    create_source_table,
    redis_hashes,
    source_rows,
)
from driftlab.scenarios.architectures.dual_write.client import DualWriteClient

log = logging.getLogger("driftlab.setups.dual_write")

INDEXER_CHANNEL = "indexer"
APP_MODULE = "driftlab.scenarios.architectures.dual_write.app"


class DualWrite(Setup):
    """PostgreSQL source, Redis cache and tantivy search index written by the app itself."""

    name = "dual-write"
    services = ("postgres", "redis")

    def __init__(self) -> None:
        super().__init__()
        self.derived: tuple[str, ...] = (CACHE, SEARCH)
        self.stores = self.derived
        self.on_failure = "ignore"
        self.retries = 5
        self.gap = 0.0
        self.search_mode = "direct"
        self.refresh = 0.2
        self.sequential_lock: threading.Lock | None = None
        self.index: SearchIndex | None = None
        self.pending_invalidations: dict[str, set[str]] = {CACHE: set(), SEARCH: set()}
        self.pending_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._indexer_queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self._indexer_offsets = itertools.count()
        self._indexer_idle = threading.Event()
        self.table = sql.Identifier("items")
        self.prefix = ""
        self.pg_app = self.pg_direct = ""
        self._redis_app: Endpoint | None = None
        self._redis_direct: Endpoint | None = None
        self.apps = AppInstances(APP_MODULE)

    # -- lifecycle -----------------------------------------------------------------

    def prepare(self, ctx: SetupContext) -> None:
        """Create `<namespace>.items`, the Redis prefix and the search index of the run."""
        self.ctx = ctx
        p = ctx.params
        self.derived = tuple(p.get("derived", (CACHE, SEARCH)))
        unknown = set(self.derived) - {CACHE, SEARCH}
        if unknown:
            raise ValueError(
                f"dual-write: unknown derived stores {sorted(unknown)}; use cache, search"
            )
        self.stores = self.derived
        mode = p.get("mode", "concurrent")
        if mode not in ("concurrent", "sequential"):
            raise ValueError(f"dual-write: mode {mode!r}; use concurrent or sequential")
        self.sequential_lock = threading.Lock() if mode == "sequential" else None
        self.on_failure = p.get("on_failure", "ignore")
        if self.on_failure not in ("ignore", "retry", "invalidate"):
            raise ValueError(
                f"dual-write: on_failure {self.on_failure!r}; use ignore, retry or invalidate"
            )
        self.retries = int(p.get("retries", 5))
        self.gap = float(p.get("gap_ms", 0)) / 1000
        self.search_mode = p.get("search", "direct")
        if self.search_mode not in ("direct", "indexer"):
            raise ValueError(f"dual-write: search {self.search_mode!r}; use direct or indexer")
        self.refresh = float(p.get("refresh_ms", 200)) / 1000

        # Links are made once here: the application's clients all share them.
        self.pg_app = pg_conninfo(endpoint(ctx.stack, "postgres"))
        self.pg_direct = pg_conninfo(endpoint(ctx.stack, "postgres", direct=True))
        if CACHE in self.derived:
            self._redis_app = endpoint(ctx.stack, "redis")
            self._redis_direct = endpoint(ctx.stack, "redis", direct=True)
        self.table = create_source_table(self.pg_direct, ctx.namespace)
        self.prefix = f"{ctx.namespace}:"
        if SEARCH in self.derived:
            self.index = SearchIndex(ctx.work_dir / f"search-{ctx.namespace}")

    def start(self) -> None:
        """Start the index refresher (direct) or the indexer worker (indexer)."""
        if self.index is None:
            return
        target = self._indexer if self.search_mode == "indexer" else self._refresher
        thread = threading.Thread(
            target=target, name=f"{self.name}-{self.search_mode}", daemon=True
        )
        thread.start()
        self._threads.append(thread)

    def client(self, process: str) -> DualWriteClient:
        """A client driving an application instance of its own (started on first use)."""
        return DualWriteClient(self, process)

    def spawn_app(self, process: str) -> AppProcess:
        """Start the application instance `process`, on the app's links."""
        r = self._redis_app
        config = {
            "pg": self.pg_app,
            "table": [self.context.namespace, "items"],
            "prefix": self.prefix,
            "redis": None if r is None else {"host": r.host, "port": r.port, "extra": r.extra},
        }
        return self.apps.spawn(process, config, self.context.logs / "app.log")

    def kill_app(self, process: str) -> int | None:
        """SIGKILL the application instance `process` and return its pid (None: no
        instance of that name runs)."""
        return self.apps.kill(process)

    def close_app(self, process: str) -> None:
        """End the application instance `process` normally (its client is done)."""
        self.apps.close(process)

    def quiesce(self, timeout: float) -> bool:
        """Flush pending invalidations and the indexer queue, then commit the index."""
        flusher = DualWriteClient(self, "quiesce")

        def flushed() -> bool:
            flusher.flush_invalidations()
            with self.pending_lock:
                pending = any(self.pending_invalidations.values())
            drained = self._indexer_queue.empty() and (
                self.search_mode != "indexer" or self._indexer_idle.is_set()
            )
            return not pending and drained

        try:
            if not wait_until(flushed, timeout):
                return False
        finally:
            flusher.close()
        if self.index is not None:
            self.index.commit()
            if self.search_mode == "indexer":
                self.context.recorder.mark(
                    "consumer-done", consumer="indexer", channel=INDEXER_CHANNEL
                )
        return True

    def final_states(self) -> dict[str, State]:
        """The source's live rows, the cache's hashes and the index's visible documents."""
        states = {SOURCE_STORE: source_rows(self.pg_direct, self.table)}
        if CACHE in self.derived:
            states[CACHE] = redis_hashes(self._redis_direct, self.prefix)
        if self.index is not None:
            self.index.commit()
            states[SEARCH] = self.index.items()
        return states

    def teardown(self) -> None:
        """Stop the index threads and release the index writer; end leftover instances."""
        self.apps.close_all()
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        if self.index is not None:
            self.index.close()

    # -- internals -----------------------------------------------------------------

    def _refresher(self) -> None:
        assert self.index is not None
        while not self._stop.wait(self.refresh):
            try:
                self.index.commit()
            except Exception:
                # A full disk under the run folder: into the run's log, not a thread's
                # traceback on the terminal; the index simply stops refreshing.
                log.exception("search index commit failed; the index stops refreshing")
                return

    def _indexer(self) -> None:
        """Apply queued index changes in batches, one refresh per batch."""
        assert self.index is not None
        rec = self.context.recorder
        while not self._stop.is_set():
            batch: list[dict[str, Any]] = []
            with contextlib.suppress(queue.Empty):
                batch.append(self._indexer_queue.get(timeout=self.refresh))
                while True:
                    batch.append(self._indexer_queue.get_nowait())
            if not batch:
                self._indexer_idle.set()
                continue
            self._indexer_idle.clear()
            for m in batch:
                rec.msg(action="deliver", consumer="indexer", process="indexer", attempt=1, **m)
                if m["value"] is None:
                    self.index.delete(m["key"])
                else:
                    self.index.write(m["key"], m["value"], m["version"])
            # Batching is the point: the view lags by up to one refresh interval.
            time.sleep(self.refresh)
            self.index.commit()
            for m in batch:
                rec.msg(action="apply", consumer="indexer", process="indexer", store=SEARCH, **m)
            if self._indexer_queue.empty():
                self._indexer_idle.set()

    def enqueue_index(self, key: str, value: str | None, version: int | None) -> None:
        """Hand one change to the indexer (recorded as a `produce`)."""
        m = {
            "channel": INDEXER_CHANNEL,
            "partition": 0,
            "offset": next(self._indexer_offsets),
            "msg_id": f"{self.context.namespace}:{key}:{version}",
            "key": key,
            "value": value,
            "version": version,
        }
        self._indexer_idle.clear()
        self.context.recorder.msg(action="produce", **m)
        self._indexer_queue.put(m)
