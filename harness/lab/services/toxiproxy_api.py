"""Toxiproxy's HTTP API (v2) spoken over the unix socket driftlab-toxiproxy serves it on
(harness/lab/services/toxiproxy.py says why a socket): the calls the lab's links need."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.http_client import http_client

API_TIMEOUT = 10.0


class ToxiproxyApi:
    """Toxiproxy's HTTP API (v2) on its unix socket: one connection per call."""

    def __init__(self, socket_path: Path, timeout: float = API_TIMEOUT) -> None:
        self.socket_path = socket_path
        self._http = http_client(timeout, socket=socket_path, base_url="http://toxiproxy")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, decoded JSON reply or None); ServiceError when nothing answers."""
        try:
            reply = self._http.request(method, path, json=body)
        except httpx.TransportError as exc:
            raise ServiceError(
                f"toxiproxy at {self.socket_path} did not answer ({exc}); is the stack up? "
                "(`driftlab status`)"
            ) from exc
        try:
            decoded = reply.json() if reply.content.strip() else None
        except ValueError:
            decoded = reply.text.strip()
        return reply.status_code, decoded

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        """The reply of a call that must succeed; ServiceError with the server's word."""
        status, reply = self.call(method, path, body)
        if not 200 <= status < 300:
            said = reply.get("error") if isinstance(reply, dict) else reply
            raise ServiceError(f"toxiproxy: {method} {path} refused ({status}: {said})")
        return reply

    def version(self) -> str:
        """The server's version (answers only once the API serves)."""
        status, reply = self.call("GET", "/version")
        return str(reply) if status == 200 else ""

    def proxies(self) -> dict[str, dict[str, Any]]:
        """Every proxy by name, with its toxics."""
        return dict(self.ok("GET", "/proxies") or {})

    def proxy(self, name: str) -> dict[str, Any] | None:
        """One proxy, or None when the server has none by that name."""
        status, reply = self.call("GET", _proxy_path(name))
        if status == 404:
            return None
        if status != 200:
            raise ServiceError(f"toxiproxy: GET {_proxy_path(name)} refused ({status}: {reply})")
        return dict(reply)

    def create(self, name: str, listen: str, upstream: str) -> None:
        """A new enabled proxy."""
        body = {"name": name, "listen": listen, "upstream": upstream, "enabled": True}
        self.ok("POST", "/proxies", body)

    def delete(self, name: str) -> None:
        self.ok("DELETE", _proxy_path(name))

    def set_enabled(self, name: str, enabled: bool) -> None:
        self.ok("POST", _proxy_path(name), {"enabled": enabled})

    def add_toxic(self, name: str, toxic: dict[str, Any]) -> None:
        self.ok("POST", f"{_proxy_path(name)}/toxics", toxic)

    def delete_toxic(self, name: str, toxic: str) -> None:
        """Remove a toxic; one already gone (removed concurrently) is no error."""
        path = f"{_proxy_path(name)}/toxics/{quote(toxic, safe='')}"
        status, reply = self.call("DELETE", path)
        if status not in (204, 404):
            raise ServiceError(f"toxiproxy: DELETE {path} refused ({status}: {reply})")

    def reset(self) -> None:
        """Every toxic removed and every proxy enabled."""
        self.ok("POST", "/reset")


def _proxy_path(name: str) -> str:
    return f"/proxies/{quote(name, safe='')}"
