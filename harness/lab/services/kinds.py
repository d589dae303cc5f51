"""The kinds of service a stack can start, by name: how to build each, what it
depends on, whether a plain `driftlab up` starts it and how long it may take."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from driftlab.harness.lab.services.analysis import ANALYSIS, AnalysisService
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.connect import connect_from_deps
from driftlab.harness.lab.services.kafka import cluster_from_spec
from driftlab.harness.lab.services.nats import NatsService
from driftlab.harness.lab.services.postgres import PostgresService
from driftlab.harness.lab.services.rabbitmq import RabbitMQService
from driftlab.harness.lab.services.redis import RedisService
from driftlab.harness.lab.services.supervised import ProcessService, ServiceSpec
from driftlab.harness.lab.services.toxiproxy import ToxiproxyService

TOXIPROXY = "toxiproxy"

ServiceFactory = Callable[[ServiceSpec, Mapping[str, ProcessService]], ProcessService]


@dataclass(frozen=True, slots=True)
class ServiceKind:
    """How to build one service: a factory given its spec and its started dependencies."""

    factory: ServiceFactory
    depends_on: tuple[str, ...] = ()
    default: bool = True  # part of a plain `driftlab up`
    start_timeout: float = 90.0


REGISTRY: dict[str, ServiceKind] = {}


def register(
    name: str,
    factory: ServiceFactory,
    depends_on: Iterable[str] = (),
    default: bool = True,
    start_timeout: float = 90.0,
) -> None:
    """Make a service kind available to stacks under `name`."""
    REGISTRY[name] = ServiceKind(factory, tuple(depends_on), default, start_timeout)


# RabbitMQ first: it is the slowest to boot, so the others start while it does.
register("rabbitmq", lambda spec, deps: RabbitMQService(spec))
register("postgres", lambda spec, deps: PostgresService(spec))
register("redis", lambda spec, deps: RedisService(spec))
register("nats", lambda spec, deps: NatsService(spec))
register(TOXIPROXY, lambda spec, deps: ToxiproxyService(spec), start_timeout=30.0)
# JVMs on a shared 2-core machine: a cold start can take a minute.
register("kafka", lambda spec, deps: cluster_from_spec(spec), start_timeout=120.0)
register("connect", connect_from_deps, depends_on=("kafka", TOXIPROXY), start_timeout=120.0)
# Not a default: runs never need it, and the docker backend has no image for it; a
# plain local `driftlab up` adds it (driftlab.harness.cli.stack).
register(ANALYSIS, lambda spec, deps: AnalysisService(spec), default=False, start_timeout=180.0)


def default_services() -> list[str]:
    """The services a plain `driftlab up` starts."""
    return [name for name, kind in REGISTRY.items() if kind.default]


def start_order(names: Iterable[str]) -> list[str]:
    """`names` with Toxiproxy and every dependency, each after what it depends on."""
    ordered: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name not in REGISTRY:
            known = ", ".join(REGISTRY)
            raise ServiceError(f"unknown service {name!r}; known services: {known}")
        if name in path:
            raise ServiceError(f"services depend on each other in a cycle: {path}")
        for dep in REGISTRY[name].depends_on:
            visit(dep, (*path, name))
        if name not in ordered:
            ordered.append(name)

    for name in (TOXIPROXY, *names):
        visit(name, ())
    return ordered


def stop_waves(names: list[str]) -> Iterator[list[str]]:
    """`names` in waves that may stop together: a service waits for those among `names`
    that depend on it (Connect commits its offsets to Kafka on the way down)."""
    remaining = list(names)
    while remaining:
        wave = [
            n
            for n in remaining
            if not any(n in _depends_on(other) for other in remaining if other != n)
        ] or remaining
        yield wave
        remaining = [n for n in remaining if n not in wave]


def _depends_on(name: str) -> tuple[str, ...]:
    kind = REGISTRY.get(name)
    return kind.depends_on if kind else ()
