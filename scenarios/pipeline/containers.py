"""Services a test suite started with testcontainers, as a pipeline file's `[external]`.

A suite that starts `PostgresContainer` and `RedisContainer` (testcontainers-python)
hands them to a run as they are: `external_urls({"postgres": pg, "redis": cache})` reads
each started container's address and credentials and writes the URL `[external]`
takes, so driftlab puts its Toxiproxy links in front of them like in front of any
service already running (docs/pipelines.md, "In your test suite").

The address: on host networking (`host_network`) the server listens on the machine's
loopback at the port the container was given (`container.port`), and Docker publishes
nothing, so testcontainers' `get_exposed_port` has nothing to answer; otherwise the
host testcontainers reports and the port Docker mapped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar
from urllib.parse import quote


class Started(Protocol):
    """What is read of a testcontainers container (DockerContainer's own methods)."""

    def get_wrapped_container(self) -> Any: ...
    def get_container_host_ip(self) -> str: ...
    def get_exposed_port(self, port: int) -> int | str: ...


class ContainerError(ValueError):
    """A container that cannot be an external service: the message says the fix."""


C = TypeVar("C")


def host_network(container: C) -> C:
    """Ask Docker for host networking for `container` (not started yet): the server
    shares the machine's loopback, nothing is published (Docker refuses published ports
    on the host network, and testcontainers' containers publish their `port`). The
    image must then be told to listen on 127.0.0.1 and on a free port."""
    c: Any = container
    c.ports.clear()
    # with_kwargs would replace the container's other Docker arguments: add to them.
    c._kwargs = {**getattr(c, "_kwargs", {}), "network_mode": "host"}
    return container


def address(container: Started, port: int) -> tuple[str, int]:
    """Where `container`'s server listening on `port` is reached from this machine."""
    from testcontainers.core.exceptions import ContainerStartException

    try:
        wrapped = container.get_wrapped_container()
    except ContainerStartException as exc:
        raise ContainerError(f"{exc}: start the container (`with ... as c:` or .start())") from None
    if wrapped.attrs.get("HostConfig", {}).get("NetworkMode") == "host":
        return "127.0.0.1", int(port)
    return container.get_container_host_ip(), int(container.get_exposed_port(port))


def _attr(container: object, name: str, service: str) -> Any:
    value = getattr(container, name, None)
    if value is None:
        kind = type(container).__name__
        raise ContainerError(
            f"external {service}: a {kind} has no `{name}`; pass testcontainers' "
            f"{'PostgresContainer' if service == 'postgres' else 'RedisContainer'} "
            f'or the URL itself ("{service}://...")'
        )
    return value


def postgres_url(container: Any) -> str:
    """`postgresql://user:password@host:port/db` of a started PostgresContainer."""
    user = quote(str(_attr(container, "username", "postgres")), safe="")
    password = quote(str(_attr(container, "password", "postgres")), safe="")
    db = quote(str(_attr(container, "dbname", "postgres")), safe="")
    host, port = address(container, _attr(container, "port", "postgres"))
    return f"postgresql://{user}:{password}@{host}:{port}/{db}"


def redis_url(container: Any) -> str:
    """`redis://[default:password@]host:port/0` of a started RedisContainer."""
    host, port = address(container, _attr(container, "port", "redis"))
    password = getattr(container, "password", None)
    auth = f"default:{quote(str(password), safe='')}@" if password else ""
    return f"redis://{auth}{host}:{port}/0"


READERS = {"postgres": postgres_url, "redis": redis_url}
"""The services a container can stand for, and how its URL is read."""


def external_urls(given: Mapping[str, object]) -> dict[str, str]:
    """`[external]`'s URLs for `given`: per service, a started container or the URL."""
    out: dict[str, str] = {}
    for service, value in given.items():
        if isinstance(value, str):
            out[service] = value
            continue
        reader = READERS.get(service)
        if reader is None:
            fix = (
                "give its bootstrap servers (KafkaContainer: get_bootstrap_server())"
                if service == "kafka"
                else "give its URL"
            )
            raise ContainerError(
                f"external {service}: driftlab reads no container for it "
                f"(only {', '.join(READERS)}); {fix}"
            )
        out[service] = reader(value)
    return out
