"""Black-box observation: driftlab looks at every derived store from outside.

During the run a thread samples each store every `sample_ms` and records what it saw
as `read` operations of the process `observer` (history docs: an `op` read whose
completion carries the value seen, and the version where the store keeps one). Only
changes are recorded: a key's first value, each new value, and its disappearance (a
read of null), each with the time it was first seen. So the checkers have a timeline
of each store without a line of the user's code instrumented.

After the heal, `converge` waits until every store equals the source (the same value
for every key, no key more or less) or has settled (unchanged for `window` seconds,
the source too), or the time runs out. A store that does not converge is recorded as
a `not-converged` mark naming the store, how many keys differ, the first of them and
since when: the run's verdict says so (driftlab.harness.app.pipeline).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

from driftlab.harness.history.schema import OBSERVER, SOURCE_STORE
from driftlab.harness.lab.runner.periodic import Periodic
from driftlab.harness.lab.setups.base import Recorder
from driftlab.harness.lab.setups.moments import Moments
from driftlab.harness.lab.setups.stores import State
from driftlab.scenarios.pipeline.readers import Arrivals, Reader

log = logging.getLogger("driftlab.pipeline")

NOT_CONVERGED = "not-converged"
"""The mark of a store that did not converge to the source after the heal."""
KEYS_NAMED = 10
FIRST_LOOK_S = 0.025
"""The convergence wait's first pause between readings; each next one doubles, up to the
sampling interval."""

_T = TypeVar("_T")


@dataclass
class Divergence:
    """How one store differs from the source after the convergence wait."""

    store: str
    keys: list[str]  # every differing key, sorted
    settled: bool  # unchanged for the window (else still changing when time ran out)
    since_s: float | None  # the oldest differing key's last write, in seconds from the
    # history's first event: the clock of the report's timeline
    never_held: bool = False  # no sample of the whole run found a key in the store
    log: bool = False  # a log store: `keys` are those of writes that never arrived
    causes: list[str] = field(default_factory=list)  # the file's connectors that FAILED

    def line(self) -> str:
        """One line a person reads."""
        named = ", ".join(self.keys[:KEYS_NAMED]) + (" ..." if len(self.keys) > KEYS_NAMED else "")
        how = "settled so" if self.settled else "still changing when the wait ended"
        since = (
            f", differing since {self.since_s:.1f} s after the history's first event "
            "(the report's clock; the file's `at` counts from the workload's start)"
            if self.since_s is not None
            else ""
        )
        count = len(self.keys)
        what = (
            "key(s) with writes that never arrived" if self.log else "key(s) differ from the source"
        )
        line = f"store {self.store}: {count} {what} ({named}){since}; {how}"
        if self.never_held:
            line += f"; no key was ever seen in it: check how [stores.{self.store}] reads it"
        if self.causes:
            line += "; " + "; ".join(self.causes)
        return line


@dataclass
class _Seen:
    state: State = field(default_factory=dict)
    changed: float = field(default_factory=time.monotonic)
    held: bool = False  # some sample found a key


def scoped(source: State, store: str, views: Collection[str]) -> State:
    """The part of `source` store `store` must hold: of a view store, its own keys
    `<store>/<key>`; of any other, the whole."""
    if store not in views:
        return source
    prefix = f"{store}/"
    return {k: v for k, v in source.items() if k.startswith(prefix)}


def differing(source: State, store: State) -> list[str]:
    """Keys whose value in `store` is not the source's (a mirror compares values)."""
    keys = set(source) | set(store)
    return sorted(k for k in keys if (source.get(k) or (None,))[0] != (store.get(k) or (None,))[0])


@dataclass
class Lag:
    """Reports each mirror store's observed lag to the run's moments: the age of the
    oldest acknowledged write (by `last_value`, key -> its last acknowledged value) the
    store does not show yet, 0 when it shows them all."""

    last_value: dict[str, str | None]
    moments: Moments
    views: tuple[str, ...] = ()  # view stores: each judged on its own keys only

    def report(self, store: str, state: State, last_write: dict[str, int], now_ns: int) -> None:
        """Report `store`'s lag as of `state`, read at `now_ns`."""
        prefix = f"{store}/" if store in self.views else ""
        behind = [
            now_ns - last_write.get(key, now_ns)
            for key, value in dict(self.last_value).items()
            if key.startswith(prefix) and (state.get(key) or (None,))[0] != value
        ]
        self.moments.emit("lag", store, max(behind, default=0) / 1e9)


class Observer:
    """Samples `readers` (store -> Reader) into `rec`, in a thread of its own; with a
    `lag`, each mirror store's sample is reported as a lag moment too."""

    def __init__(
        self,
        rec: Recorder,
        source: Reader,
        readers: dict[str, Reader],
        interval_s: float,
        last_write: dict[str, int],
        logs: dict[str, Arrivals] | None = None,
        written: set[tuple[str, str]] | None = None,
        lag: Lag | None = None,
        views: tuple[str, ...] = (),
    ) -> None:
        self.rec = rec
        self.lag = lag
        self.views = views  # view stores: their keys `<store>/<key>` (scoped)
        self.source = source
        self.readers = readers
        self.logs = logs or {}
        self.interval = interval_s
        self.last_write = last_write  # key -> ns time of its last ok source write
        self.written = written if written is not None else set()  # ok (key, value) writes
        # The report's clock starts at the history's first event, the header of the
        # run's segment (all of a pipeline run's events go through `rec`).
        self.started_ns = rec.opened_ns or time.time_ns()
        self._seen = {name: _Seen() for name in (*readers, *self.logs)}
        self._arrived: dict[str, Counter[tuple[str, str]]] = {n: Counter() for n in self.logs}
        self._source_seen = _Seen()
        self._lock = threading.Lock()
        self._loop = Periodic("observer", interval_s, self._sample_all)
        self.errors = 0

    def start(self) -> None:
        """Start sampling."""
        self._loop.start()

    def stop(self) -> None:
        """Stop sampling (the convergence wait samples on its own)."""
        self._loop.stop()

    def _sample_all(self) -> None:
        for name in self.readers:
            self.sample(name)
        for name in self.logs:
            self.sample_log(name)

    def sample_log(self, name: str) -> Counter[tuple[str, str]] | None:
        """Read log store `name` once and record each write that arrived since the last
        reading as an `apply` to it (a second arrival of one write: a second apply)."""
        with self._lock:
            now = self._attempt(name, self.logs[name].rows)
            if now is None:
                return None
            seen_ns = time.time_ns()
            before = self._arrived[name]
            for (key, value), n in sorted(now.items()):
                for _ in range(n - before.get((key, value), 0)):
                    self.rec.msg(
                        action="apply",
                        store=name,
                        key=key,
                        value=value,
                        msg_id=f"{name}/{key}/{value}",
                        consumer=OBSERVER,
                        process=OBSERVER,
                        time=seen_ns,
                    )
            seen = self._seen[name]
            if now != before:
                self._arrived[name], seen.changed = now, time.monotonic()
            seen.held = seen.held or bool(now)
            return now

    def sample(self, name: str) -> State | None:
        """Read store `name` once and record what changed; None if the read failed."""
        with self._lock:
            invoked = time.time_ns()
            now = self._attempt(name, self.readers[name].read_all)
            if now is None:
                return None
            seen_ns = time.time_ns()
            seen = self._seen[name]
            for key in sorted(set(now) | set(seen.state)):
                before, after = seen.state.get(key), now.get(key)
                if before == after:
                    continue
                value, version = after if after is not None else (None, None)
                self._record_read(name, key, value, version, invoked, seen_ns)
            if now != seen.state:
                seen.state, seen.changed = now, time.monotonic()
            seen.held = seen.held or bool(now)
            if self.lag is not None:
                self.lag.report(name, now, self.last_write, seen_ns)
            return now

    def _attempt(self, name: str, read: Callable[[], _T]) -> _T | None:
        """What `read` returns, or None (counted and logged) if store `name` cannot be
        read now."""
        try:
            return read()
        except Exception as exc:  # a store that cannot be read now is no verdict
            self.errors += 1
            log.warning("observing %s failed: %s", name, exc)
            return None

    def _record_read(
        self, store: str, key: str, value: str | None, version: int | None, t0: int, t1: int
    ) -> None:
        op_id = f"observe-{store}-{key}-{t1}"
        common: dict[str, Any] = {"process": OBSERVER, "f": "read", "op_id": op_id, "key": key}
        self.rec.op(phase="invoke", store=store, time=t0, **common)
        self.rec.op(phase="ok", store=store, value=value, version=version, time=t1, **common)

    def _read_source(self) -> State:
        now = self.source.read_all()
        if now != self._source_seen.state:
            self._source_seen = _Seen(now)
        return now

    def converge(self, timeout: float, window: float) -> list[Divergence]:
        """After the heal: wait until every store equals the source, or has settled, or
        `timeout` passes; the stores that differ then, each also as a mark."""
        self.stop()
        deadline = time.monotonic() + timeout
        # Most stores catch up within a moment of the heal: look again soon, then less
        # often, up to the sampling interval (a big store is not read 40 times a second).
        pause = min(self.interval, FIRST_LOOK_S)
        while True:
            source = self._read_source()
            diffs: dict[str, list[str]] = {}
            for name in self.readers:
                now = self.sample(name)
                keys = (
                    differing(scoped(source, name, self.views), now)
                    if now is not None
                    else ["(unreadable)"]
                )
                if keys:
                    diffs[name] = keys
            for name in self.logs:
                rows = self.sample_log(name)
                lost = {k for k, v in self.written if rows is None or (k, v) not in rows}
                if lost:
                    diffs[name] = sorted(lost)
            if not diffs:
                return []
            t = time.monotonic()
            settled = {
                n: t - self._seen[n].changed >= window and t - self._source_seen.changed >= window
                for n in diffs
            }
            if all(settled.values()) or t >= deadline:
                break
            time.sleep(pause)
            pause = min(self.interval, pause * 2)
        out = []
        for name, keys in diffs.items():
            held = self._seen[name].held
            since = self._since(keys)
            d = Divergence(name, keys, settled[name], since, not held, log=name in self.logs)
            log.warning("not converged: %s", d.line())
            self.rec.mark(
                NOT_CONVERGED,
                store=name,
                extra={
                    "keys": keys[:100],
                    "count": len(keys),
                    "settled": d.settled,
                    "since_s": d.since_s,
                    "never_held": d.never_held,
                    "against": SOURCE_STORE,
                },
            )
            out.append(d)
        return out

    def _since(self, keys: list[str]) -> float | None:
        times = [self.last_write[k] for k in keys if k in self.last_write]
        return (min(times) - self.started_ns) / 1e9 if times else None
