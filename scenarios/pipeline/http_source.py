"""A source the user's application writes: one HTTP request per workload write.

`PUT http://127.0.0.1:{shop.port}/items/{key}` with the JSON body `{"key": k, "value":
v}` (`value` null for a delete). The answer's JSON `version`, when there is one, is the
write's version. How a request ends is the write's Jepsen completion: a 2xx is `ok`; a
refused connection or a 4xx certainly changed nothing (`fail`); a 5xx, a timeout or a
connection cut mid-answer may have written the database (`info`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from driftlab.harness.lab.services.http_client import caused_by, http_client
from driftlab.harness.lab.setups.stores import Outcome
from driftlab.scenarios.pipeline.links import fill

HTTP_TIMEOUT_S = 5.0


class HttpWriter:
    """The requests of `source.http` and `source.http_delete`, templates filled."""

    def __init__(self, write: str, delete: str | None, values: dict[str, Any]) -> None:
        self.write = write
        self.delete = delete
        self.values = values
        self._http = http_client(HTTP_TIMEOUT_S)

    def execute(self, _conn: object, key: str, value: str | None) -> int | None:
        """Send the write (value None: the delete); the version answered, if any."""
        template = self.write if value is not None else self.delete
        if template is None:
            raise Outcome("fail", "the pipeline file has no source.http_delete request")
        method, _, url = fill(template, {**self.values, "key": quote(key, safe="")}).partition(" ")
        try:
            answer = self._http.request(method, url, json={"key": key, "value": value})
        except httpx.TransportError as exc:  # refused: nothing sent; else a timeout, a reset
            refused = caused_by(exc, (ConnectionRefusedError,))
            why = str(exc) or type(exc).__name__
            raise Outcome("fail" if refused else "info", f"{method} {url}: {why}") from exc
        if answer.status_code >= 300:
            phase = "fail" if answer.status_code < 500 else "info"
            raise Outcome(phase, f"HTTP {answer.status_code} from {method} {url}")
        try:
            version = answer.json().get("version") if answer.content else None
        except (ValueError, AttributeError):
            return None
        return int(version) if isinstance(version, int | str) and str(version).isdigit() else None
