"""Every run starts from a clean stack and proves it.

A run killed with SIGKILL cannot heal its faults nor drop its Debezium connector, so on
a shared stack (`driftlab up`) it left a toxic on a link and a connector with its
replication slot, and the next run gave a false verdict. Before its workload, a run now

- heals every Toxiproxy link and checks that none has a toxic left or is disabled;
- removes the leftovers of runs that are no longer alive: Debezium connectors, the
  replication slots and publications whose names hold a run's namespace (a scenario's
  `dbz_<namespace>`, a pipeline's own, named after `{namespace}` as docs/pipelines.md
  asks), and a pipeline run's PostgreSQL role (named its namespace);
- holds a lease `leases/<namespace>.json` in the stack folder (pid and start time)
  while it runs, which tells a live run's resources from a dead run's. The lease is
  taken first, under an exclusive lock of `leases/run.lock` held for the whole run, so
  that of two runs started together on one stack exactly one proceeds (the lock goes
  with its process, even a SIGKILLed one).

`driftlab status` shows the same: active toxics and leftovers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from driftlab.harness.history.exitcodes import LabFailure
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.postgres import drop_replication_slots, drop_role
from driftlab.harness.lab.services.process import read_start_time
from driftlab.harness.lab.services.stack_lock import open_lock
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.harness.lab.setups.base import NAMESPACE_PREFIX

log = logging.getLogger("driftlab.runner")

LEASES = "leases"
RUN_LOCK = "run.lock"


@dataclass
class Leftovers:
    """What dead runs left on a stack, and which links are not clean."""

    connectors: list[str] = field(default_factory=list)
    slots: list[str] = field(default_factory=list)
    publications: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    toxics: dict[str, list[str]] = field(default_factory=dict)  # link -> toxic names
    disabled: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # services down: not looked at

    def lines(self) -> list[str]:
        """One line per kind of leftover, for the terminal and the log."""
        out = [f"link {name}: toxics {', '.join(t)}" for name, t in sorted(self.toxics.items())]
        out += [f"link {name}: disabled" for name in self.disabled]
        for what, names in (
            ("connector", self.connectors),
            ("replication slot", self.slots),
            ("publication", self.publications),
            ("role", self.roles),
        ):
            out += [f"{what} {n} of a run no longer alive" for n in names]
        return out


def _lease_dir(stack: ServiceStack) -> Path:
    return Path(stack.root) / LEASES


def live_namespaces(stack: ServiceStack) -> set[str]:
    """The namespaces of runs alive on this stack (their lease's process still runs)."""
    alive = set()
    for path in _lease_dir(stack).glob("*.json"):
        try:
            lease = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if read_start_time(int(lease.get("pid", 0))) == lease.get("start_time"):
            alive.add(path.stem)
    return alive


def _in_use(stack: ServiceStack, others: set[str]) -> LabFailure:
    runs = ", ".join(sorted(others)) or "another driftlab process"
    return LabFailure(
        f"the stack in {stack.root} is in use by run(s) {runs}: runs on one stack share "
        "its links and would suffer each other's faults; wait for them, or start another "
        "stack (`driftlab up --dir DIR`, --stack-dir DIR)"
    )


@contextlib.contextmanager
def run_lease(stack: ServiceStack, namespace: str) -> Iterator[None]:
    """Mark `namespace` as the live run on `stack` for the block; LabFailure at once
    when another run holds the stack (its lock, taken atomically)."""
    folder = _lease_dir(stack)
    fd, taken = open_lock(folder / RUN_LOCK)
    try:
        if not taken:
            raise _in_use(stack, live_namespaces(stack))
        path = folder / f"{namespace}.json"
        pid = os.getpid()
        path.write_text(json.dumps({"pid": pid, "start_time": read_start_time(pid)}) + "\n")
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
    finally:
        os.close(fd)  # releases the lock


def _dead(name: str, prefix: str, alive: set[str]) -> bool:
    """Whether a resource named `<prefix><namespace>...` belongs to no live run."""
    if not name.startswith(prefix + NAMESPACE_PREFIX):
        return False
    rest = name.removeprefix(prefix)
    return not any(rest == ns or rest.startswith(ns + "_") for ns in alive)


NAMESPACE_IN = re.compile(rf"(^|_){NAMESPACE_PREFIX}")
"""Where a name holds a run's namespace: at its start or after an underscore."""


def _of_dead_run(name: str, alive: set[str]) -> bool:
    """Whether `name` holds a run's namespace (anywhere: `dbz_<ns>_pub`, `<ns>`) and
    no live run's."""
    return NAMESPACE_IN.search(name) is not None and not any(ns in name for ns in alive)


def _running(stack: ServiceStack, name: str) -> bool:
    return name in stack.services and stack.services[name].is_running()


def find_leftovers(stack: ServiceStack) -> Leftovers:
    """Toxics, disabled links and the resources of dead runs on a local stack."""
    found = Leftovers()
    # What a stack that has the service may hold; a service of it that is down could
    # not be looked at, which is not "no leftovers".
    found.unchecked = [
        name
        for name in ("toxiproxy", "connect", "postgres")
        if name in stack.services and not _running(stack, name)
    ]
    if _running(stack, "toxiproxy"):
        for link in stack.links.list():
            if link.toxics:
                found.toxics[link.name] = list(link.toxics)
            if not link.enabled:
                found.disabled.append(link.name)
    alive = live_namespaces(stack)
    if _running(stack, "connect"):
        connect = stack["connect"]
        names = set(connect.registered()) | set(connect.rest("GET", "/connectors") or [])
        found.connectors = sorted(n for n in names if _dead(n, "", alive))
    if _running(stack, "postgres"):
        with psycopg.connect(stack["postgres"].conninfo(), autocommit=True) as conn:
            slots = conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
            pubs = conn.execute("SELECT pubname FROM pg_publication").fetchall()
            roles = conn.execute("SELECT rolname FROM pg_roles").fetchall()
        found.slots = sorted(s for (s,) in slots if _of_dead_run(s, alive))
        found.publications = sorted(p for (p,) in pubs if _of_dead_run(p, alive))
        found.roles = sorted(r for (r,) in roles if _dead(r, "", alive))
    return found


def clean(stack: ServiceStack, own: str | None = None) -> Leftovers:
    """Heal every link, remove what dead runs left, and prove the stack clean.

    Returns what was found (and removed). Raises LabFailure when another run than the
    caller's own (`own`, its namespace) is in progress on the stack (runs share its
    links, so each would be judged on the other's faults), or when a link still has a
    toxic afterwards.
    """
    others = live_namespaces(stack) - {own}
    if others:
        raise _in_use(stack, others)
    before = find_leftovers(stack)
    if _running(stack, "toxiproxy"):
        stack.links.heal_all()
    if _running(stack, "connect"):
        for name in before.connectors:
            stack["connect"].delete_connector(name)
    if before.slots or before.publications or before.roles:
        with psycopg.connect(stack["postgres"].conninfo(), autocommit=True) as conn:
            for role in before.roles:  # first: it ends the sessions that hold slots
                drop_role(conn, role)
            for slot in before.slots:
                # A deleted connector's task lets go of its slot a moment later.
                _drop_slot(conn, slot)
            for pub in before.publications:
                conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(pub)))
    after = find_leftovers(stack)
    if after.toxics or after.disabled or after.slots or after.roles:
        raise LabFailure(
            "the stack is not clean after healing: "
            + "; ".join(after.lines())
            + "; stop it with `driftlab down` and start it again"
        )
    return before


def _drop_slot(conn: psycopg.Connection[Any], slot: str, timeout: float = 30.0) -> None:
    if not drop_replication_slots(conn, slot, timeout=timeout):
        raise ServiceError(
            f"replication slot {slot} of a dead run is still in use after "
            f"{timeout:.0f} s; restart the stack (`driftlab down`, `driftlab up`)"
        )
