"""The lab's HTTP client (httpx), for every service and application it speaks HTTP to.

Each request gets a connection of its own, as a client without a pool would: the nemesis
kills, pauses and cuts the servers these clients reach (Connect, the user's processes,
Toxiproxy itself), and a request must meet the fault as a new client would, never a
pooled connection left over from before it. HTTPS is verified against the machine's
CAs unless the caller brings its own context (Connect's client certificate).
"""

from __future__ import annotations

import functools
import ssl
from pathlib import Path
from typing import Any

import httpx

ONE_CONNECTION_PER_REQUEST = httpx.Limits(max_keepalive_connections=0)


def http_client(
    timeout: float,
    *,
    verify: ssl.SSLContext | None = None,
    socket: Path | None = None,
    **options: Any,
) -> httpx.Client:
    """A client whose requests time out after `timeout` s; over the unix socket `socket`
    when given (plain HTTP, nothing to verify). `options` go to httpx.Client."""
    transport = httpx.HTTPTransport(
        uds=None if socket is None else str(socket),
        verify=False if socket is not None else verify or _machine_cas(),
        limits=ONE_CONNECTION_PER_REQUEST,
    )
    return httpx.Client(timeout=timeout, transport=transport, **options)


@functools.cache
def _machine_cas() -> ssl.SSLContext:
    # Loading the machine's CAs takes ~50 ms: once per process, not per client.
    return ssl.create_default_context()


def caused_by(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    """Whether `exc` or an error behind it (httpx wraps the socket's) is one of `kinds`."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
