"""A dual-write workload client: it drives its application instance (an OS process) and
writes the search index itself, recording the history."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Protocol

from driftlab.harness.history.schema import SOURCE_STORE, STEP
from driftlab.harness.lab.setups.app_process import AFTER_SOURCE_WRITE, AppDied, AppProcess
from driftlab.harness.lab.setups.base import AppCrash, Client, ReadResult, SetupContext
from driftlab.harness.lab.setups.stores import CACHE, SEARCH, Outcome, SearchIndex


class DualWriteApp(Protocol):
    """What a client reads and calls of its dual-write setup (setup.DualWrite has it;
    setup.py imports this module, so the client names the setup's parts it uses)."""

    context: SetupContext
    derived: tuple[str, ...]
    gap: float
    index: SearchIndex | None
    on_failure: str
    pending_invalidations: dict[str, set[str]]
    pending_lock: threading.Lock
    retries: int
    search_mode: str
    sequential_lock: threading.Lock | None

    def spawn_app(self, process: str) -> AppProcess:
        """Start the process's application instance."""
        ...

    def close_app(self, process: str) -> None:
        """End the process's application instance."""
        ...

    def enqueue_index(self, key: str, value: str | None, version: int | None) -> None:
        """Hand a write to the indexer thread."""
        ...


class DualWriteClient(Client):
    """One application instance: its process (AppProcess) and the history it makes."""

    def __init__(self, setup: DualWriteApp, process: str) -> None:
        super().__init__(setup.context.recorder, process)
        self.setup = setup
        self.rng = setup.context.client_rng(process)
        self._app: AppProcess | None = None

    # -- the three operations ------------------------------------------------------

    def write(self, key: str, value: str) -> None:
        """Write the source, then (after the step point) every derived store."""
        self._dual(key, value)

    def delete(self, key: str) -> None:
        """Tombstone the source row, then delete the key from every derived store."""
        self._dual(key, None)

    def read(self, key: str, store: str) -> None:
        """Read `key` from one store and record the value and version seen."""
        op = self._invoke("read", key, None, store)
        try:
            result = self._read(key, store)
        except Outcome as o:
            # A read changes nothing: its failure is a plain fail whatever the cause.
            self._fail(op, o, phase="fail")
            return
        self._complete(op, "ok", value=result.value, version=result.version)

    def ready(self) -> None:
        """Start the application instance and wait until it listens (a death at start
        is met by the first operation)."""
        with contextlib.suppress(AppDied):
            self._instance().wait_ready()

    def close(self) -> None:
        """End the application instance (a killed one is only reaped)."""
        self.setup.close_app(self.process)

    # -- internals -----------------------------------------------------------------

    def _dual(self, key: str, value: str | None) -> None:
        lock = self.setup.sequential_lock
        with lock if lock is not None else contextlib.nullcontext():
            self.flush_invalidations()
            f = "write" if value is not None else "delete"
            op = self._invoke(f, key, value, SOURCE_STORE)
            try:
                version = int(self._call(do="source-write", key=key, value=value)["version"])
            except Outcome as o:
                self._fail(op, o)
                return
            self._complete(op, "ok", version=version)
            self.setup.context.steps.reach(AFTER_SOURCE_WRITE, self.process, key)
            if self._app is not None and not self._app.alive():
                # SIGKILLed at the step point: the derived writes died with the process.
                raise AppCrash(f"{self.process} was killed at {AFTER_SOURCE_WRITE}")
            if self.setup.gap:
                time.sleep(self.rng.uniform(0, self.setup.gap))
            for store in self.setup.derived:
                self._derived_write(store, key, value, version)

    def _derived_write(self, store: str, key: str, value: str | None, version: int) -> None:
        setup = self.setup
        if store == SEARCH and setup.search_mode == "indexer":
            setup.enqueue_index(key, value, version)
            return
        f = "write" if value is not None else "delete"
        op = self._invoke(f, key, value, store, step="derived-write")
        attempts = 1 + (setup.retries if setup.on_failure == "retry" else 0)
        outcome: Outcome | None = None
        for attempt in range(attempts):
            if attempt:
                time.sleep(min(0.1 * 2**attempt, 1.0))
            try:
                self._store_write(store, key, value, version)
                outcome = None
                break
            except AppDied as o:
                self._fail(op, o, version=version)
            except Outcome as o:
                outcome = o
        if outcome is None:
            self._complete(op, "ok", version=version)
            return
        self._complete(op, outcome.phase, version=version, error=str(outcome))
        if setup.on_failure == "invalidate":
            with setup.pending_lock:
                setup.pending_invalidations[store].add(key)

    def flush_invalidations(self) -> None:
        """Delete keys whose derived write failed, from stores that answer again."""
        setup = self.setup
        for store, keys in setup.pending_invalidations.items():
            with setup.pending_lock:
                todo = list(keys)
            for key in todo:
                op = self._invoke("invalidate", key, None, store, step="invalidate")
                try:
                    self._store_write(store, key, None, None)
                except Outcome as o:
                    self._fail(op, o)
                    return
                self._complete(op, "ok")
                with setup.pending_lock:
                    keys.discard(key)

    def _instance(self) -> AppProcess:
        if self._app is None:
            self._app = self.setup.spawn_app(self.process)
        return self._app

    def _call(self, **request: Any) -> dict[str, Any]:
        return self._instance().call(**request)

    def _store_write(self, store: str, key: str, value: str | None, version: int | None) -> None:
        if store == CACHE:
            self._call(do="cache-write", key=key, value=value, version=version)
            return
        index = self.setup.index
        assert index is not None
        if value is None:
            index.delete(key)
        else:
            index.write(key, value, version)

    def _read(self, key: str, store: str) -> ReadResult:
        if store == SOURCE_STORE or (store == CACHE and CACHE in self.setup.derived):
            reply = self._call(do="read", store=store, key=key)
            return ReadResult(reply["value"], reply["version"])
        if store == SEARCH and self.setup.index is not None:
            hit = self.setup.index.get(key)
            return ReadResult(*hit) if hit else ReadResult(None)
        raise ValueError(f"dual-write has no store {store!r}; use source, cache or search")

    def _fail(self, op_id: str, o: Outcome, phase: str | None = None, **fields: Any) -> None:
        """Complete a failed op; a dead application process ends this instance."""
        self._complete(op_id, phase or o.phase, error=str(o), **fields)
        if isinstance(o, AppDied):
            raise AppCrash(str(o)) from o

    def _invoke(
        self, f: str, key: str, value: str | None, store: str, step: str | None = None
    ) -> str:
        # A step is part of the client's operation (driftlab.harness.history.schema.STEP).
        extra = None if step is None else {STEP: step}
        return self.rec.invoke(self.process, f, key=key, value=value, store=store, extra=extra)

    def _complete(self, op_id: str, phase: str, **fields: Any) -> None:
        self.rec.complete(op_id, phase, **fields)
