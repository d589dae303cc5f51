"""Client connections of a setup: through the stack's Toxiproxy links, or direct.

The application's clients go through the link `app->service`, so the nemesis can cut,
slow or reset exactly their traffic; final reads after heal go straight to the server,
so no leftover fault can hide a store's true state.
"""

from __future__ import annotations

from typing import Any

import psycopg
import redis

from harness.services.base import Endpoint

APP = "app"
"""The client name of the application's links: `app->postgres`, `app->redis`, ..."""


def endpoint(stack: Any, service: str, *, direct: bool = False) -> Endpoint:
    """Where the application (or, `direct`, the harness) reaches `service`."""
    if direct:
        return stack.endpoint(service)
    return stack.link(APP, service)


def pg_conninfo(ep: Endpoint) -> str:
    """A libpq connection string for a PostgreSQL endpoint (credentials in `extra`)."""
    return psycopg.conninfo.make_conninfo(
        host=ep.host,
        port=ep.port,
        user=ep.extra.get("user"),
        password=ep.extra.get("password"),
        dbname=ep.extra.get("dbname"),
    )


def redis_client(ep: Endpoint | None, timeout: float = 1.0) -> redis.Redis:
    """A Redis client (decoded strings) with short timeouts, so a cut link fails fast."""
    if ep is None:
        raise RuntimeError("redis endpoint unknown: the setup was not prepared with a cache")
    return redis.Redis(
        host=ep.host,
        port=ep.port,
        password=ep.extra.get("password"),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        decode_responses=True,
    )
