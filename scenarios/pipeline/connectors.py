"""A pipeline file's Kafka Connect connectors on the stack's worker.

Each `[[connectors]]` config is filled in for the run (its `{postgres.host}`-style
placeholders from the worker's own links, `connect->postgres`, so faults can cut the
worker off), named `<namespace>_<name>` (a run never resumes another's offsets, and a
dead run's connector is found by the stack's clean-up) and registered through the
worker's REST API (HTTPS with the stack's client certificate), or a user's own worker's
(`[external] connect`, driftlab.harness.lab.services.connect_rest: the config as given). The worker
keeps every
connector for its restarts, so a crash of `connect` ends with the same connectors
running again; passwords reach it only as `${file:...}` references
(ConnectService.sealed_config).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.connect import (
    ConnectorFailed,
    ConnectService,
    RestError,
    task_failed,
)
from driftlab.harness.lab.services.connect_rest import ConnectRest
from driftlab.scenarios.pipeline import links
from driftlab.scenarios.pipeline.spec_connectors import ConnectorSpec, connect_template

log = logging.getLogger("driftlab.pipeline")

REGISTER_TIMEOUT_S = 90.0
"""How long a connector may take to run once registered (Connect validates it first,
and a JDBC sink opens its connection pool)."""


@dataclass(frozen=True)
class RunConnector:
    """One connector as the run registers it: its worker name and filled config."""

    name: str
    settings: dict[str, str]

    def config(self) -> dict[str, str]:
        """The config Connect takes (ConnectService seals its passwords)."""
        return {"name": self.name, **self.settings}


def for_run(
    specs: tuple[ConnectorSpec, ...], namespace: str, values: dict[str, Any]
) -> list[RunConnector]:
    """The run's connectors, their templates filled from `values` (the worker's links)."""
    return [
        RunConnector(
            f"{namespace}_{spec.name}",
            {k: links.fill(connect_template(v), values) for k, v in spec.config.items()},
        )
        for spec in specs
    ]


class Registered:
    """The connectors a run put on the worker (the stack's, or a user's own reached by
    its REST URL), removed together at its end."""

    def __init__(self, connect: ConnectService | ConnectRest) -> None:
        self.connect = connect
        self.names: list[str] = []
        self.trace_where = (
            connect.trace_where
            if isinstance(connect, ConnectRest)
            else "the run's logs/connect.log"
        )

    def put(self, connectors: list[RunConnector]) -> None:
        """Register each in order and wait until it runs. A config Connect refuses, or
        whose task fails as it starts, is the file's mistake (the worker itself runs):
        ValueError, one line with Connect's reason and where its trace is."""
        for connector in connectors:
            self.names.append(connector.name)
            try:
                self.connect.put_connector(connector, timeout=REGISTER_TIMEOUT_S)
            except RestError as exc:
                if exc.status != 400:
                    raise
                reason = " ".join(str(exc).split())[:400]
                raise ValueError(
                    f"connectors: {connector.name}: Connect refused its config ({reason}); "
                    "fix it in the pipeline file"
                ) from None
            except ConnectorFailed as exc:
                lines = str(exc).splitlines()
                reason = lines[1].strip()[:400] if len(lines) > 1 else str(exc)[:400]
                raise ValueError(
                    f"connectors: {connector.name}: its task failed as it started ({reason}); "
                    f"the trace is in {self.trace_where}: fix the config"
                ) from None
            log.info("connector %s running", connector.name)

    def remove(self) -> None:
        """Delete every connector this run registered (their slots are the setup's)."""
        for name in reversed(self.names):
            with contextlib.suppress(ServiceError, OSError):
                self.connect.delete_connector(name)
        self.names.clear()

    def failed(self) -> list[str]:
        """One line per connector of the run (or task of one) that is FAILED now, with
        its trace's first line and where the whole trace is; a worker that does not
        answer adds nothing (the watchdog judges the worker)."""
        out = []
        for name in self.names:
            try:
                status = self.connect.rest("GET", f"/connectors/{name}/status")
            except (ServiceError, OSError, ValueError):
                continue
            states = [*status.get("tasks", ()), status.get("connector", {})]
            out += [
                f"{task_failed(name, s)}: see {self.trace_where}"
                for s in states
                if s.get("state") == "FAILED"
            ]
        return out
