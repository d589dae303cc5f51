"""The workload's client threads: each drives one setup client at its share of the rate.

Every value a client writes is unique in the run (driftlab.harness.history.values, prefixed by the
client's process name), which is what lets the checkers tell every write apart. The setup's client
records each operation (invoke, then ok / fail / info with the source `version`); a
client that crashes at a step point (`AppCrash`) is replaced by a restarted instance
under a new process name, as a restarted application would be.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from driftlab.harness.history.values import UniqueValues
from driftlab.harness.lab.setups.base import AppCrash, Client, Setup
from driftlab.harness.lab.workload.spec import KeyChooser, OpChooser, WorkloadSpec

log = logging.getLogger("driftlab.workload")


@dataclass
class WorkloadStats:
    """Counts of one workload run, for the terminal summary."""

    ops: int = 0
    crashes: int = 0
    errors: int = 0
    elapsed: float = 0.0
    """seconds from the workload's start to its last operation's completion: closing
    the clients (stopping their application processes) is not the workload's time"""
    by_op: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        """Achieved operations per second."""
        return self.ops / self.elapsed if self.elapsed > 0 else 0.0


class Workload:
    """`spec.clients` threads running against `setup` until `duration` or `stop()`."""

    def __init__(self, spec: WorkloadSpec, setup: Setup, seed: int) -> None:
        spec.validate()
        self.spec = spec
        self.setup = setup
        self.seed = seed
        self.stats = WorkloadStats()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._last_done: float | None = None  # when the last operation completed
        self._threads: list[threading.Thread] = []
        self._clients: list[Client] = []
        stores = setup.read_stores()
        wanted = spec.read_stores if spec.read_stores is not None else list(stores)
        missing = set(wanted) - set(stores)
        if missing:
            raise ValueError(
                f"workload.read_stores {sorted(missing)} not offered by setup "
                f"{setup.name!r}; it offers {list(stores)}"
            )
        self.read_stores = wanted

    def prepare(self) -> None:
        """Make every client ready, together (each may start a process): what the
        clients take to start is not the workload's time."""
        clients = [self.setup.client(f"c{i}") for i in range(self.spec.clients)]
        with ThreadPoolExecutor(max(1, len(clients))) as pool:
            list(pool.map(lambda c: c.ready(), clients))
        self._clients = clients

    def start(self) -> None:
        """Start the clock and the client threads (preparing the clients first if
        `prepare` was not called)."""
        if not self._clients:
            self.prepare()
        self._started = time.monotonic()
        for i, client in enumerate(self._clients):
            t = threading.Thread(
                target=self._run, args=(i, client), name=f"client-c{i}", daemon=True
            )
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Ask every client to finish its current operation and stop."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> WorkloadStats:
        """Wait for the clients (they stop by themselves after `duration`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        with self._lock:
            end = self._last_done if self._last_done is not None else time.monotonic()
        self.stats.elapsed = end - self._started
        return self.stats

    def run(self) -> WorkloadStats:
        """Start, wait for the duration, and return the stats."""
        self.start()
        return self.join()

    def alive(self) -> bool:
        """Whether any client thread still runs."""
        return any(t.is_alive() for t in self._threads)

    def _run(self, index: int, first: Client) -> None:
        spec = self.spec
        rng = random.Random(f"{self.seed}/client/{index}")
        choose_key = KeyChooser(spec, rng)
        choose_op = OpChooser(spec, rng)
        restarts = 0
        base = f"c{index}"
        process = base
        client: Client | None = first
        values = UniqueValues(process)
        last_written: str | None = None
        interval = spec.clients / spec.rate if spec.rate > 0 else 0.0
        end = self._started + spec.duration
        next_at = self._started + rng.random() * interval
        try:
            while not self._stop.is_set() and time.monotonic() < end:
                if interval:
                    delay = next_at - time.monotonic()
                    if delay > 0 and self._stop.wait(delay):
                        break
                    next_at += interval
                if client is None:
                    client = self.setup.client(process)
                op = choose_op()
                if op == "read" and spec.read_own and last_written is not None:
                    key = last_written
                else:
                    key = choose_key(time.monotonic() - self._started)
                try:
                    if op == "write":
                        client.write(key, values.next())
                        last_written = key
                    elif op == "delete":
                        client.delete(key)
                        last_written = key
                    else:
                        client.read(key, rng.choice(self.read_stores))
                except AppCrash:
                    # The instance died mid-operation: no cleanup, a fresh instance.
                    with contextlib.suppress(Exception):
                        client.close()
                    client = None
                    restarts += 1
                    process = f"{base}r{restarts}"
                    values = UniqueValues(process)
                    with self._lock:
                        self.stats.crashes += 1
                except Exception:
                    if self._stop.is_set():
                        # Stopped mid-operation, its history maybe closed meanwhile (a
                        # client left behind on a dead broker): the run is over.
                        break
                    # A setup bug must not take the run down silently: log, count, go on.
                    log.exception("client %s: %s of %s raised", process, op, key)
                    with self._lock:
                        self.stats.errors += 1
                with self._lock:
                    self.stats.ops += 1
                    self.stats.by_op[op] = self.stats.by_op.get(op, 0) + 1
                    self._last_done = time.monotonic()
        finally:
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()
