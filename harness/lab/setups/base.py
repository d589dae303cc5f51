"""The Setup interface: how an architecture under test is wired onto the services.

A setup is the system under test: which stores exist, how the application writes them,
and which background consumers carry changes between them. The runner drives every
setup the same way:

    setup.prepare(ctx)                  # fresh tables / keys / topics under ctx.namespace
    setup.start()                       # background consumers, connectors, indexers
    client = setup.client("c3")         # one per workload client thread
    client.write(key, value) ...        # the workload's operations, recorded by the client
    setup.quiesce(deadline)             # after heal: wait until every pipeline drained
    setup.final_states()                # store -> {key: (value, version)} for `state` events
    setup.teardown()                    # stop consumers, close connections (keep the data)

Operations record their own history events through `ctx.recorder`, because only the
setup knows which stores an operation touches (dual write records one `op` per store it
writes; a CDC setup records the source write and lets its consumer record `msg` events).

Step points are named places inside an operation (`after-source-write` is the moment
between the two writes of a dual write). The nemesis arms crash hooks on them, and a
replay of a found interleaving blocks clients on them; see `StepPoints`.
See docs/scenarios.md for a walk-through of writing a setup.
"""

from __future__ import annotations

import random
import re
import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from driftlab.harness.lab.services.stack_protocol import ServiceStack

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.rundir import Findings, RunDir
from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.lab.setups.moments import Moments

StepHook = Callable[[str, str, str], None]
"""`hook(point, process, key)`: runs when a client reaches a step point; it may block
(replay) or raise `AppCrash` (a crash at that point)."""


NAMESPACE_PREFIX = "dl_"
"""Every run's namespace starts so: a stack's leftovers of runs are found by it."""


def namespace_for(scenario: str) -> str:
    """A lower-case SQL identifier unique to the run, for its tables, keys and topics."""
    slug = re.sub(r"[^a-z0-9]+", "_", scenario.lower()).strip("_")[:24]
    return f"{NAMESPACE_PREFIX}{slug}_{secrets.token_hex(4)}"


class AppCrash(Exception):
    """The application died at a step point: nothing after it runs, nothing cleans up."""


class StepPoints:
    """The hooks of a run's step points, shared by every client of a setup."""

    def __init__(self) -> None:
        self._hooks: list[StepHook] = []
        self._lock = threading.Lock()

    def add(self, hook: StepHook) -> None:
        """Register a hook called at every step point."""
        with self._lock:
            self._hooks.append(hook)

    def remove(self, hook: StepHook) -> None:
        """Unregister a hook (a healed crash window)."""
        with self._lock:
            if hook in self._hooks:
                self._hooks.remove(hook)

    def reach(self, point: str, process: str, key: str) -> None:
        """Called by a client at `point`; runs every hook (which may raise AppCrash)."""
        with self._lock:
            hooks = list(self._hooks)
        for hook in hooks:
            hook(point, process, key)


@dataclass
class SetupContext:
    """Everything a setup gets from the runner.

    `namespace` is unique per run (a valid SQL identifier, lower case); every table,
    Redis key prefix, topic and queue a setup creates lives under it, so runs on one
    shared stack never see each other's data. `stack` is the running
    ServiceStack (local or docker); clients reach services through its Toxiproxy links
    so the nemesis can cut them. `work_dir` is the run directory's folder for embedded
    stores (the search index). `params` are the scenario's setup parameters.
    """

    namespace: str
    stack: ServiceStack
    recorder: Recorder
    work_dir: Path
    params: dict[str, Any] = field(default_factory=dict)
    steps: StepPoints = field(default_factory=StepPoints)
    seed: int = 0
    moments: Moments = field(default_factory=Moments)  # what faults at a moment wait for

    @property
    def logs(self) -> Path:
        """The run folder's logs/, for the logs and status files of the setup's processes."""
        return RunDir(self.work_dir).logs

    def client_rng(self, process: str) -> random.Random:
        """The random stream of the client `process`: its own, and the same in every run
        of this seed, so that a scenario's operations replay."""
        return random.Random(f"{self.seed}/{process}")


@dataclass(frozen=True, slots=True)
class ReadResult:
    """A read of one key of one store: `value` None means the key is absent."""

    value: str | None
    version: int | None = None


class Client(ABC):
    """One application client, used by a single workload thread.

    Every method records its own `op` events (invoke, then ok/fail/info) and returns
    normally whatever the outcome: a failure is history, not an exception. Only
    `AppCrash` escapes, and the workload then restarts the client under a new process
    name (a restarted application instance).
    """

    def __init__(self, rec: Recorder, process: str) -> None:
        self.rec = rec
        self.process = process

    @abstractmethod
    def write(self, key: str, value: str) -> None:
        """Set `key` to the unique `value` in the source and whatever the setup derives."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete `key` from the source (and the derived stores, per the setup)."""

    @abstractmethod
    def read(self, key: str, store: str) -> None:
        """Read `key` from `store` and record what was seen (value and version)."""

    def ready(self) -> None:  # noqa: B027 (optional hook)
        """Block until the client can take its first operation: the workload calls it
        before its clock starts (an application process started and listening)."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release connections (a crashed client is closed without ceremony)."""


class SourceChangeClient(Client):
    """A client whose write and delete are each one change of the key's source row,
    recorded as one op of the source: `change` makes the change and completes the op."""

    def write(self, key: str, value: str) -> None:
        """Set the key's source row to `value`."""
        op = self.rec.invoke(self.process, "write", key=key, value=value, store=SOURCE_STORE)
        self.change(op, key, value)

    def delete(self, key: str) -> None:
        """Delete the key's source row."""
        op = self.rec.invoke(self.process, "delete", key=key, store=SOURCE_STORE)
        self.change(op, key, None)

    @abstractmethod
    def change(self, op: str, key: str, value: str | None) -> None:
        """Make the change the invoked `op` asks for (`value` None: a delete) and
        complete `op` with its outcome."""


class Setup(ABC):
    """An architecture under test. Subclasses set `name` and `stores`.

    `stores` lists the derived stores' names as they appear in history `store` columns
    (the source is always `driftlab.harness.history.schema.SOURCE_STORE`); `read_stores` the
    stores a workload may read.
    """

    name: str = ""
    stores: tuple[str, ...] = ()
    services: tuple[str, ...] = ()  # stack services the setup needs (e.g. "postgres")
    # Stack services whose failures to serve though they run (a connector's task
    # FAILED) belong to the system under test, not to the lab: a pipeline file's own
    # connectors on driftlab's Connect. The watchdog leaves those to the verdict.
    under_test: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.ctx: SetupContext | None = None

    @property
    def context(self) -> SetupContext:
        """The context given to `prepare` (raises if the setup is not prepared)."""
        if self.ctx is None:
            raise RuntimeError(f"setup {self.name!r} used before prepare()")
        return self.ctx

    @abstractmethod
    def prepare(self, ctx: SetupContext) -> None:
        """Create the run's fresh tables, keys, topics and indexes under ctx.namespace."""

    def start(self) -> None:  # noqa: B027 (optional hook)
        """Start background consumers (none by default)."""

    def process(self, name: str) -> Any:
        """A process the setup runs itself (a consumer) under `name`, as a
        driftlab.harness.lab.services.base.Service that crash, pause and restart faults act on; None
        when `name` is none of its own (the fault then targets the stack's service)."""
        return None

    def kill_app(self, process: str) -> int | None:
        """SIGKILL the application instance `process` if the setup runs it as an OS
        process, returning its pid; None when the setup's clients live in the harness
        (an `app-crash` is then an AppCrash raised at the step point)."""
        return None

    @abstractmethod
    def client(self, process: str) -> Client:
        """A new client for one workload thread (or a restarted application instance)."""

    def read_stores(self) -> tuple[str, ...]:
        """The stores a workload may read (the source and every derived store)."""
        return (SOURCE_STORE, *self.stores)

    def quiesce(self, timeout: float) -> bool:
        """Wait until every pipeline has drained; False if `timeout` ran out first."""
        return True

    @abstractmethod
    def final_states(self) -> dict[str, dict[str, tuple[str, int | None]]]:
        """Final contents of every store, source included: store -> key -> (value, version)."""

    def teardown(self) -> None:  # noqa: B027 (optional hook)
        """Stop consumers and close connections; the data stays for inspection."""

    def findings(self) -> Findings:
        """What the setup found of the system under test outside the history, once the
        run is over: logs/run.json records it and the verdict weighs it (none by
        default: the book's setups tell everything through the history)."""
        return Findings()
