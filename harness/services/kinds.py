"""The kinds of service a stack can start, by name: how to build each, what it
depends on, whether a plain `driftlab up` starts it and how long it may take."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from harness.services.analysis import ANALYSIS, AnalysisService
from harness.services.connect import connect_from_deps
from harness.services.kafka import cluster_from_spec
from harness.services.nats import NatsService
from harness.services.postgres import PostgresService
from harness.services.rabbitmq import RabbitMQService
from harness.services.redis import RedisService
from harness.services.supervised import ProcessService, ServiceSpec
from harness.services.toxiproxy import ToxiproxyService

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
# plain local `driftlab up` adds it (harness.cli.stack).
register(ANALYSIS, lambda spec, deps: AnalysisService(spec), default=False, start_timeout=180.0)


def default_services() -> list[str]:
    """The services a plain `driftlab up` starts."""
    return [name for name, kind in REGISTRY.items() if kind.default]
