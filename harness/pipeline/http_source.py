"""A source the user's application writes: one HTTP request per workload write.

`PUT http://127.0.0.1:{shop.port}/items/{key}` with the JSON body `{"key": k, "value":
v}` (`value` null for a delete). The answer's JSON `version`, when there is one, is the
write's version. How a request ends is the write's Jepsen completion: a 2xx is `ok`; a
refused connection or a 4xx certainly changed nothing (`fail`); a 5xx, a timeout or a
connection cut mid-answer may have written the database (`info`).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

from harness.pipeline.links import fill
from harness.setups.stores import Outcome

HTTP_TIMEOUT_S = 5.0


class HttpWriter:
    """The requests of `source.http` and `source.http_delete`, templates filled."""

    def __init__(self, write: str, delete: str | None, values: dict[str, Any]) -> None:
        self.write = write
        self.delete = delete
        self.values = values

    def execute(self, _conn: object, key: str, value: str | None) -> int | None:
        """Send the write (value None: the delete); the version answered, if any."""
        template = self.write if value is not None else self.delete
        if template is None:
            raise Outcome("fail", "the pipeline file has no source.http_delete request")
        method, _, url = fill(template, {**self.values, "key": quote(key, safe="")}).partition(" ")
        body = json.dumps({"key": key, "value": value}).encode()
        request = urllib.request.Request(
            url, data=body, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as exc:
            phase = "fail" if exc.code < 500 else "info"
            raise Outcome(phase, f"HTTP {exc.code} from {method} {url}") from exc
        except urllib.error.URLError as exc:
            reason = exc.reason
            refused = isinstance(reason, ConnectionRefusedError)
            raise Outcome("fail" if refused else "info", f"{method} {url}: {reason}") from exc
        except (http.client.HTTPException, OSError) as exc:  # a timeout, a reset
            raise Outcome("info", f"{method} {url}: {exc or type(exc).__name__}") from exc
        try:
            version = json.loads(raw or b"{}").get("version")
        except (ValueError, AttributeError):
            return None
        return int(version) if isinstance(version, int | str) and str(version).isdigit() else None
