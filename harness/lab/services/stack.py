"""The local stack: a set of supervised services in one folder, plus Toxiproxy links.

A stack folder holds `data/<service>/`, `logs/<service>.log` and `stack.json`, the state
file (pids, ports, credentials, links) through which another harness process finds a
running stack: `driftlab up` starts one that outlives the command, `driftlab run`,
`status` and `down` attach to it. A stack owned by a test or a run instead dies with
its owner (PR_SET_PDEATHSIG on every leader plus a reaper process for the groups).

Services register in `driftlab.harness.lab.services.kinds.REGISTRY` (name -> ServiceKind), each with
a factory from its own module.

The state file is `stack.json` (driftlab.harness.lab.services.stack_state).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftlab.harness.lab.services.base import Endpoint, ServiceError
from driftlab.harness.lab.services.kinds import (
    REGISTRY,
    TOXIPROXY,
    default_services,
    start_order,
    stop_waves,
)
from driftlab.harness.lab.services.ports import LOOPBACK, port_holder, port_is_free
from driftlab.harness.lab.services.process import ProcessRecord
from driftlab.harness.lab.services.reaper import spawn as spawn_reaper
from driftlab.harness.lab.services.runtime import LocalRuntime, Runtime
from driftlab.harness.lab.services.stack_state import (
    STATE_FILE,
    read_state,
    service_state,
    write_state,
)
from driftlab.harness.lab.services.supervised import ProcessService, ServiceSpec
from driftlab.harness.lab.services.toxiproxy import Links, ToxiproxyService, link_name

Progress = Callable[[str, str], None]  # (service, event) for the terminal


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    """One line of `driftlab status`."""

    name: str
    pids: dict[str, int]
    port: int | None
    running: bool
    healthy: bool
    log_path: Path


class Stack:
    """Services in one folder, started on demand, each reachable through named links.

    `owned=True` (tests, runs): everything dies with this process. `owned=False`
    (`driftlab up`): the services outlive it and are found again through the state file.
    Start services from the main thread (or one that lives as long as the stack): the
    parent-death signal fires when the thread that forked a service exits.
    """

    def __init__(self, root: Path, *, owned: bool = True, temporary: bool = False) -> None:
        self.root = Path(root).absolute()
        self.owned = owned
        self.temporary = temporary  # the folder goes with the stack, even if its owner dies
        self.services: dict[str, ProcessService] = {}
        self.links_made: dict[str, dict[str, Any]] = {}
        self._reaper: subprocess.Popen[bytes] | None = None
        self._state_lock = threading.Lock()
        self._saved_specs: dict[str, dict[str, Any]] = {}

    @property
    def state_path(self) -> Path:
        return self.root / STATE_FILE

    # --- starting and stopping --------------------------------------------------------

    def _prepare_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        # PostgreSQL runs unprivileged and must be able to enter the stack folder.
        self.root.chmod(0o755)
        (self.root / "data").mkdir(exist_ok=True)
        (self.root / "data").chmod(0o755)
        if not self._saved_specs and self.state_path.exists():
            self._saved_specs = read_state(self.state_path).get("services", {})

    def runtime(self, name: str) -> Runtime:
        """Where the service `name` runs its programs: here, as local processes (the
        docker backend's stack runs them in containers)."""
        return LocalRuntime()

    def state_extra(self) -> dict[str, Any]:
        """More for the state file, which the reaper reads (the docker stack's id)."""
        return {}

    def _spec(self, name: str) -> ServiceSpec:
        saved = self._saved_specs.get(name, {}).get("spec")
        if saved is None:
            return ServiceSpec(
                name, self.root, die_with_parent=self.owned, runtime=self.runtime(name)
            )
        spec = ServiceSpec.from_json(name, self.root, saved)
        spec.runtime = self.runtime(name)
        spec.die_with_parent = self.owned
        # Keep the old ports (clients and data may remember them) unless now taken.
        spec.ports = {k: p for k, p in spec.ports.items() if port_is_free(p, allow_time_wait=True)}
        return spec

    def up(self, *names: str, progress: Progress | None = None) -> Stack:
        """Start the named services (with Toxiproxy and dependencies) and wait healthy.

        Services already running are left alone. Each service starts as soon as its
        dependencies are healthy, so slow independent ones (RabbitMQ) overlap the rest.
        Processes are launched from the calling thread (the parent-death signal is tied
        to it); only the health probes run in threads. On failure or Ctrl-C everything
        this call started is killed and the error says which service and why.
        """
        wanted = start_order(names or default_services())
        self._prepare_root()
        if self.owned and self._reaper is None:
            self._reaper = spawn_reaper(
                self.state_path, self.root / "logs" / "reaper.log", remove=self.temporary
            )
        started: list[str] = []
        pending = [n for n in wanted if not self._running(n)]
        healthy = {n for n in wanted if n not in pending}
        probes: dict[Future[None], str] = {}
        pool = ThreadPoolExecutor(max_workers=max(1, len(pending)))
        try:
            while pending or probes:
                for name in [
                    n for n in pending if all(d in healthy for d in REGISTRY[n].depends_on)
                ]:
                    self._launch(name, progress)
                    started.append(name)
                    pending.remove(name)
                    probes[pool.submit(self._wait_healthy, name, progress)] = name
                if not probes:
                    raise ServiceError(f"cannot start {', '.join(pending)}: dependencies down")
                done, _ = wait_futures(probes, return_when=FIRST_COMPLETED)
                for future in done:
                    future.result()  # a failure is raised at once
                    healthy.add(probes.pop(future))
            if TOXIPROXY in self.services and self._running(TOXIPROXY):
                # A server restarted behind the stack's back has lost its proxies too.
                self.links.restore()
        except BaseException:
            # Nothing started here has served anyone yet: no need for a graceful stop,
            # which a booting server may not even heed (RabbitMQ finishes booting first).
            for name in reversed(started):
                with contextlib.suppress(ServiceError):
                    self.services[name].kill()
                    self.services[name].stop()  # helpers such as RabbitMQ's epmd
            self.write_state()
            raise
        finally:
            # Do not wait out the other probes after a failure: their services are dead
            # now, so they return at once.
            pool.shutdown(wait=False, cancel_futures=True)
        return self

    def _running(self, name: str) -> bool:
        return name in self.services and self.services[name].is_running()

    def _launch(self, name: str, progress: Progress | None) -> None:
        service = self.services.get(name)
        if service is None:
            deps = {d: self.services[d] for d in REGISTRY[name].depends_on}
            service = REGISTRY[name].factory(self._spec(name), deps)
            service.on_launch = lambda _spec: self.write_state()
            self.services[name] = service
        for role, port in service.bound_ports().items():
            # A port remembered in stack.json may have been taken since: say so, instead
            # of a server that exits at once with the reason only in its log.
            if not port_is_free(port, allow_time_wait=True):
                holder = port_holder(port)
                raise ServiceError(
                    f"{name}: port {port} ({role}) on {LOOPBACK} is in use by "
                    f"{holder or 'another program'}; stop that program and run again"
                )
        if progress:
            progress(name, "starting")
        service.start()

    def _wait_healthy(self, name: str, progress: Progress | None) -> None:
        begun = time.monotonic()
        self.services[name].wait_healthy(REGISTRY[name].start_timeout)
        if progress:
            progress(name, f"healthy in {time.monotonic() - begun:.1f}s")

    def down(self) -> None:
        """Stop every service (gracefully, escalating to SIGKILL) and the reaper.

        Services stop together, except that a service waits for those that depend on
        it (Connect commits its offsets to Kafka on the way down); Toxiproxy goes last.
        """
        for wave in stop_waves([n for n in self.services if n != TOXIPROXY]):
            with ThreadPoolExecutor(max_workers=len(wave)) as pool:
                list(pool.map(lambda name: self.services[name].stop(), wave))
        if TOXIPROXY in self.services:
            self.services[TOXIPROXY].stop()
        self.links_made.clear()
        self.write_state()
        if self._reaper is not None:
            self._reaper.terminate()
            self._reaper.wait()
            self._reaper = None

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # --- using the services -----------------------------------------------------------

    def __getitem__(self, name: str) -> ProcessService:
        try:
            return self.services[name]
        except KeyError:
            started = ", ".join(self.services) or "none"
            raise ServiceError(
                f"service {name!r} is not part of this stack (started: {started}); "
                f"start it with stack.up({name!r}) or `driftlab up --only {name}`"
            ) from None

    def endpoint(self, name: str) -> Endpoint:
        """The service's own address (for setup and final reads, never for faults)."""
        return self[name].endpoint()

    @property
    def links(self) -> Links:
        """Fault injection on the links of this stack."""
        toxiproxy = self[TOXIPROXY]
        assert isinstance(toxiproxy, ToxiproxyService)
        return toxiproxy.client()

    def link(self, client: str, service: str) -> Endpoint:
        """The address `client` uses to reach `service`, through the proxy "client->service".

        The endpoint carries the service's credentials in `extra`. Idempotent.
        """
        name = link_name(client, service)
        # A link made before keeps its port, even if Toxiproxy restarted in between.
        known = self.links_made.get(name, {}).get("port")
        endpoint = self.links.create(name, self.endpoint(service), listen_port=known)
        self.links_made[name] = {
            "client": client,
            "service": service,
            "host": endpoint.host,
            "port": endpoint.port,
        }
        self.write_state()
        return endpoint

    def status(self) -> list[ServiceStatus]:
        """Each service's pids, port, liveness and health: whether it answers a client
        (one probe each; a connector's state is the pipeline's, not the worker's)."""
        rows = []
        for name, service in self.services.items():
            running = service.is_running()
            rows.append(
                ServiceStatus(
                    name,
                    {role: r.pid for role, r in service.records().items()},
                    service.spec.ports.get("main"),
                    running,
                    running and service.answers(),
                    service.log_path,
                )
            )
        return rows

    # --- the state file ---------------------------------------------------------------

    def write_state(self) -> None:
        """Write `stack.json` atomically (mode 600: it holds the passwords)."""
        with self._state_lock:
            state = {
                "root": str(self.root),
                "owned": self.owned,
                "owner_pid": os.getpid(),
                "services": {name: service_state(svc) for name, svc in self.services.items()},
                "links": self.links_made,
                **self.state_extra(),
            }
            self.root.mkdir(parents=True, exist_ok=True)
            write_state(self.state_path, state)

    @classmethod
    def attach(cls, root: Path) -> Stack:
        """The stack described by `root/stack.json`, its live processes adopted.

        The caller does not own the processes: `down()` stops them all the same. A
        stack the docker backend started wants driftlab.harness.lab.services.backends.attach_stack.
        """
        root = Path(root).absolute()
        path = root / STATE_FILE
        if not path.exists():
            raise ServiceError(
                f"no stack in {root} (no {STATE_FILE}); start one with `driftlab up`"
            )
        state = read_state(path)
        stack = cls(root, owned=bool(state.get("owned", False)))
        stack._saved_specs = state.get("services", {})
        for name, data in stack._saved_specs.items():
            if name not in REGISTRY:
                raise ServiceError(
                    f"{path} names service {name!r}, which this driftlab does not know"
                )
            spec = ServiceSpec.from_json(name, root, data.get("spec", {}))
            spec.runtime = stack.runtime(name)
            service = REGISTRY[name].factory(spec, stack.services)
            service.on_launch = lambda _spec: stack.write_state()
            records = {
                role: ProcessRecord.from_json(r) for role, r in data.get("processes", {}).items()
            }
            service.adopt(records)
            stack.services[name] = service
        stack.links_made = dict(state.get("links", {}))
        return stack

    def is_up(self) -> bool:
        """Whether every service of the stack is running."""
        return bool(self.services) and all(s.is_running() for s in self.services.values())


@contextlib.contextmanager
def local_stack(root: Path, *names: str, progress: Progress | None = None) -> Iterator[Stack]:
    """A stack owned by this process: started here, stopped (or reaped) when done."""
    stack = Stack(root, owned=True)
    try:
        stack.up(*names, progress=progress)
        yield stack
    finally:
        stack.down()
