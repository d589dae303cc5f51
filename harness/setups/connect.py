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


def endpoint(stack: Any, service: str, *, direct: bool = False) -> Endpoint:
    """Where the application (or, `direct`, the harness) reaches `service`."""
    if direct:
        return stack.service(service).endpoint()
    return stack.link(service)


def pg_conninfo(stack: Any, *, direct: bool = False) -> str:
    """A libpq connection string to the stack's PostgreSQL."""
    ep = endpoint(stack, "postgres", direct=direct)
    return psycopg.conninfo.make_conninfo(
        host=ep.host,
        port=ep.port,
        user=ep.extra.get("user"),
        password=ep.extra.get("password"),
        dbname=ep.extra.get("dbname"),
    )


def redis_client(stack: Any, *, direct: bool = False, timeout: float = 1.0) -> redis.Redis:
    """A Redis client (decoded strings) with short timeouts, so a cut link fails fast."""
    ep = endpoint(stack, "redis", direct=direct)
    return redis.Redis(
        host=ep.host,
        port=ep.port,
        password=ep.extra.get("password"),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        decode_responses=True,
    )
