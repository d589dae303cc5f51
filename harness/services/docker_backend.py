"""The docker backend: docker/compose.yml's containers behind the surface runs use.

`DockerStack` offers what the runner and the setups use of the local `Stack`: `up`,
`down`, `endpoint`, `link`, `links` and `stack[name]`, whose kill / pause / resume /
restart act on the service's container through the Docker SDK. The containers are
provisioned with testcontainers' `DockerCompose` on docker/compose.yml; clients reach
the stores through the compose stack's Toxiproxy (API 127.0.0.1:8474), whose proxies
listen inside its container on the published range 21000-21031 and forward to the
services by their compose names.

Not supported yet: setups on Kafka and Connect, which call service methods of the local
processes (`bootstrap_servers`, per-broker links, `put_connector`); `up` refuses them
with the fix. Never run against a Docker engine on the machine that wrote it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.services.base import Endpoint, Service, ServiceError
from harness.services.toxiproxy import Links, link_name

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
COMPOSE_FILE = Path(__file__).resolve().parents[2] / "docker" / "compose.yml"
TOXIPROXY = "toxiproxy"
TOXIPROXY_API = 8474
LINK_PORTS = range(21000, 21032)  # published by compose.yml's toxiproxy service
LOOPBACK = "127.0.0.1"
UNSUPPORTED = ("kafka", "connect")


@dataclass(frozen=True, slots=True)
class ComposeService:
    """One service of compose.yml: its port inside the network and on the host, and
    the credentials a client needs (defaults of compose.yml, overridable as there)."""

    port: int
    host_port: int
    extra: dict[str, str]


def compose_services(env: dict[str, str] | None = None) -> dict[str, ComposeService]:
    """The services of docker/compose.yml as clients see them, with the environment's
    DRIFTLAB_* credentials (the same variables compose.yml interpolates)."""
    e = os.environ if env is None else env
    password = {
        name: e.get(f"DRIFTLAB_{name}_PASSWORD", "driftlab-local")
        for name in ("PG", "REDIS", "AMQP", "NATS")
    }
    return {
        "postgres": ComposeService(
            5432,
            5432,
            {
                "user": e.get("DRIFTLAB_PG_USER", "driftlab"),
                "password": password["PG"],
                "dbname": "driftlab",
            },
        ),
        "redis": ComposeService(6379, 6379, {"password": password["REDIS"]}),
        "rabbitmq": ComposeService(
            5672,
            5672,
            {
                "user": e.get("DRIFTLAB_AMQP_USER", "driftlab"),
                "password": password["AMQP"],
                "vhost": "/",
            },
        ),
        "nats": ComposeService(
            4222,
            4222,
            {"user": e.get("DRIFTLAB_NATS_USER", "driftlab"), "password": password["NATS"]},
        ),
        TOXIPROXY: ComposeService(TOXIPROXY_API, TOXIPROXY_API, {}),
    }


def docker_host() -> str:
    """The engine address the Docker SDK uses: $DOCKER_HOST, else the default socket."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def docker_client() -> Any:
    """A Docker SDK client that has answered a ping, or ServiceError with the fix."""
    from docker.errors import DockerException

    import docker

    url = docker_host()
    try:
        client = docker.DockerClient(base_url=url, timeout=10)
        client.ping()
    except DockerException as exc:
        raise ServiceError(
            f"no Docker engine at {url}: start Docker or use --backend local ({exc})"
        ) from None
    return client


class ContainerService(Service):
    """A compose service's container, crashed, paused and restarted through the SDK."""

    def __init__(self, stack: DockerStack, name: str) -> None:
        self.stack = stack
        self.name = name
        self.log_path = stack.log_dir / f"{name}.log"

    def _container(self) -> Any:
        container = self.stack.compose.get_container(self.name)
        return self.stack.client.containers.get(container.ID)

    def start(self) -> None:
        """Start the stopped container (its volume keeps the data)."""
        self._container().start()

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Wait for compose's healthcheck through `docker compose up --wait`."""
        self.stack.compose.services = [self.name]
        self.stack.compose.start()

    def stop(self) -> None:
        """Graceful stop (SIGTERM, then SIGKILL after 10 s)."""
        self._container().stop(timeout=10)

    def kill(self) -> None:
        """SIGKILL of the container's processes: a crash."""
        self._container().kill(signal="SIGKILL")

    def pause(self) -> None:
        """Freeze the container (cgroup freezer, as SIGSTOP for every process)."""
        self._container().pause()

    def resume(self) -> None:
        """Thaw it."""
        self._container().unpause()

    def restart(self) -> None:
        """Restart with the data intact, then wait for its healthcheck."""
        self._container().restart(timeout=10)
        self.wait_healthy()

    def is_running(self) -> bool:
        """Whether the container runs (paused counts as running, as locally)."""
        self._container().reload()
        return self._container().status in ("running", "paused")

    def endpoint(self) -> Endpoint:
        """The published port on 127.0.0.1 (for setup and final reads only)."""
        svc = self.stack.known[self.name]
        return Endpoint(LOOPBACK, svc.host_port, dict(svc.extra))


class DockerStack:
    """docker/compose.yml's services, with the local Stack's surface (see the module)."""

    def __init__(self, client: Any, compose_file: Path = COMPOSE_FILE) -> None:
        from testcontainers.compose import DockerCompose

        self.client = client
        self.compose_file = compose_file
        self.root = compose_file.parent
        self.log_dir = Path(os.environ.get("TMPDIR", "/tmp")) / "driftlab-docker-logs"
        self.known = compose_services()
        self.compose = DockerCompose(
            context=compose_file.parent, compose_file_name=compose_file.name, wait=True
        )
        self.services: dict[str, ContainerService] = {}
        self.links_made: dict[str, Endpoint] = {}

    @classmethod
    def connect(cls, compose_file: Path = COMPOSE_FILE) -> DockerStack:
        """A stack on the Docker engine of $DOCKER_HOST; ServiceError naming the problem
        and the fix when no engine answers or the compose file is missing."""
        if not compose_file.is_file():
            raise ServiceError(
                f"no compose file at {compose_file}: run from a driftlab checkout "
                "(docker/compose.yml) or use --backend local"
            )
        return cls(docker_client(), compose_file)

    def up(self, *names: str) -> DockerStack:
        """`docker compose up --wait` of the named services and Toxiproxy."""
        wanted = [TOXIPROXY, *(n for n in names if n != TOXIPROXY)]
        refused = [n for n in wanted if n in UNSUPPORTED]
        if refused:
            raise ServiceError(
                f"the docker backend cannot run setups on {', '.join(refused)} yet "
                "(they need the local processes' Kafka and Connect helpers): "
                "use --backend local"
            )
        unknown = [n for n in wanted if n not in self.known]
        if unknown:
            raise ServiceError(
                f"unknown service(s) {', '.join(unknown)}; the docker backend runs "
                f"{', '.join(self.known)}"
            )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.compose.services = wanted
        self.compose.start()
        for name in wanted:
            self.services.setdefault(name, ContainerService(self, name))
        return self

    def down(self) -> None:
        """`docker compose down` (volumes removed: each session starts clean)."""
        if self.services:
            self.compose.services = None
            self.compose.stop(down=True)
        self.services.clear()
        self.links_made.clear()

    def __getitem__(self, name: str) -> ContainerService:
        try:
            return self.services[name]
        except KeyError:
            started = ", ".join(self.services) or "none"
            raise ServiceError(
                f"service {name!r} is not part of this stack (started: {started}); "
                f"start it with stack.up({name!r})"
            ) from None

    def endpoint(self, name: str) -> Endpoint:
        """The service's published address (for setup and final reads, never faults)."""
        return self[name].endpoint()

    @property
    def links(self) -> Links:
        """Fault injection through the compose stack's Toxiproxy API."""
        return Links(LOOPBACK, TOXIPROXY_API)

    def link(self, client: str, service: str) -> Endpoint:
        """The address `client` uses to reach `service`: a proxy inside the Toxiproxy
        container on the next free port of the published range. Idempotent."""
        name = link_name(client, service)
        if name in self.links_made:
            return self.links_made[name]
        self[service]  # a clear error for a service that is not up
        taken = {e.port for e in self.links_made.values()}
        free = [p for p in LINK_PORTS if p not in taken]
        if not free:
            raise ServiceError(
                f"no free link port left in {LINK_PORTS.start}-{LINK_PORTS.stop - 1} "
                "(compose.yml publishes only these); use fewer links or widen the range"
            )
        svc = self.known[service]
        with self.links._api() as api:
            existing = api.get_proxy(name)
            if existing is not None:
                existing.destroy()
            api.create(upstream=f"{service}:{svc.port}", name=name, listen=f"0.0.0.0:{free[0]}")
        endpoint = Endpoint(LOOPBACK, free[0], dict(svc.extra))
        self.links_made[name] = endpoint
        return endpoint
