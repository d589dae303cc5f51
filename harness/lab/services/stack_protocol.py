"""What runs, setups and faults may use of a stack, whichever backend runs it.

The local `Stack` (harness/lab/services/stack.py) and the docker backend's `DockerStack`
(harness/lab/services/docker_backend.py) both offer this surface; code that takes a stack
names `ServiceStack`, so it cannot come to depend on one backend's internals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from driftlab.harness.lab.services.base import Endpoint, Service
from driftlab.harness.lab.services.toxiproxy import Links


class ServiceStack(Protocol):
    """Services started on demand, each reachable through named Toxiproxy links.

    `stack[name]` is the service itself: kill, pause, resume and restart act on its
    processes (local) or its container (docker); Kafka's and Connect's services add
    their own helpers (`link`, `put_connector`); a Kafka client's config comes from
    driftlab.harness.lab.services.kafka.kafka_client_config(stack, client).
    """

    @property
    def root(self) -> Path:
        """The stack's folder: data, logs and the state file."""
        ...

    @property
    def services(self) -> Mapping[str, Service]:
        """The services started so far, by name."""
        ...

    def up(self, *names: str, progress: Callable[[str, str], None] | None = None) -> ServiceStack:
        """Start the named services (with Toxiproxy and dependencies), wait healthy."""
        ...

    def down(self) -> None:
        """Stop every service; nothing of the stack is left running."""
        ...

    def __getitem__(self, name: str) -> Service:
        """The started service `name`, or ServiceError naming how to start it."""
        ...

    def endpoint(self, name: str) -> Endpoint:
        """The service's own address (setup and final reads, never faults)."""
        ...

    def link(self, client: str, service: str) -> Endpoint:
        """The address `client` uses to reach `service` through its Toxiproxy link."""
        ...

    @property
    def links(self) -> Links:
        """Faults on the stack's links."""
        ...
