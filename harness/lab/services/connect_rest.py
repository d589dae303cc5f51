"""A Kafka Connect worker of the user's own, reached only through its REST URL.

driftlab's own worker (driftlab.harness.lab.services.connect) is a process it starts, with its
connectors kept in files and its passwords sealed in a file only the stack's user
reads. A user's worker (their compose stack's, distributed or standalone) is neither:
driftlab registers a pipeline file's connectors through the REST API alone (`PUT
/connectors/<name>/config`), with the config in clear as the user would POST it
(their worker may have no FileConfigProvider, and cannot read driftlab's files), waits
until each runs, and deletes them at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from driftlab.harness.history.waiting import because, wait_until
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.connect import Connector, RestError, connector_running, rest_call
from driftlab.harness.lab.services.http_client import http_client


class ConnectRest:
    """A user's Connect worker at `url` (`http(s)://[user:password@]host:port`)."""

    name = "connect"
    trace_where = "your worker's log and GET /connectors/<name>/status"

    def __init__(self, url: str) -> None:
        u = urlsplit(url)
        self.url = f"{u.scheme}://{u.hostname}:{u.port}"
        login = (unquote(u.username), unquote(u.password or "")) if u.username else None
        self._http = http_client(10, base_url=self.url, auth=login)

    def rest(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """One REST call; the decoded JSON answer (None when empty)."""
        return rest_call(self._http, method, path, body, f"connect at {self.url}")

    def put_connector(self, connector: Connector, timeout: float = 60.0) -> None:
        """Register or replace `connector` and wait until it and its tasks run; a task
        that FAILED raises ConnectorFailed with its trace."""
        self.rest("PUT", f"/connectors/{connector.name}/config", connector.config())
        status = f"/connectors/{connector.name}/status"
        last: list[Exception] = []

        def running() -> bool:
            try:
                return connector_running(self.rest("GET", status), self.name, connector.name)
            except (RestError, KeyError) as exc:
                last[:] = [exc]  # the worker has not started it yet
                return False

        why = f"connect at {self.url}: connector {connector.name} not RUNNING after {timeout:.0f}s"
        if not wait_until(running, timeout, 0.25):
            raise ServiceError(why + because(last))

    def delete_connector(self, name: str) -> None:
        """Unregister `name` (gone already is fine)."""
        try:
            self.rest("DELETE", f"/connectors/{name}")
        except RestError as exc:
            if exc.status != 404:
                raise
