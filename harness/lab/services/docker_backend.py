"""The docker backend: the local stack's services, each in a container of its image.

`DockerStack` is the local `Stack` with a container runtime (harness/lab/services/
containers.py): the same services, ports, generated credentials, Toxiproxy links and
state file, so setups, faults and checkers do not know which backend they run on.
Faults on a service act on its container through the Docker SDK (kill: SIGKILL,
pause: cgroup freezer, restart: a new container on the same data); faults on links
go through the stack's Toxiproxy, which runs in a container too.

The images (driftlab/<service>:dev) are built by scripts/docker-images from
docker/<service>.Dockerfile; docker/compose.yml describes the same builds for
`docker compose build`. This backend does not start its containers with testcontainers:
those are started on a network of their own and cleaned up by its Ryuk reaper, an image
pulled from a registry; these need host networking (loopback-only services) and are
cleaned up by driftlab's own reaper, which removes a dead harness's containers by their
stack label. Containers a user's test suite started with testcontainers are another
matter: a pipeline run takes them as external services (driftlab.scenarios.pipeline.containers).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.containers import (
    LABEL_ROOT,
    ContainerRuntime,
    docker_client,
    image_for,
    missing_images,
    remove_containers,
    stack_containers,
    stack_id,
)
from driftlab.harness.lab.services.kinds import default_services, start_order
from driftlab.harness.lab.services.runtime import Runtime
from driftlab.harness.lab.services.stack import Progress, Stack
from driftlab.harness.lab.services.stack_state import STATE_FILE


class DockerStack(Stack):
    """A Stack whose services run in containers (see the module)."""

    def __init__(
        self, root: Path, *, owned: bool = True, temporary: bool = False, client: Any = None
    ) -> None:
        super().__init__(root, owned=owned, temporary=temporary)
        self.client = client if client is not None else docker_client()
        self.stack_id = stack_id(self.root)

    def runtime(self, name: str) -> Runtime:
        """Each service runs in its own image."""
        return ContainerRuntime(self.client, self.stack_id, self.root, image_for(name))

    def state_extra(self) -> dict[str, Any]:
        """The reaper of a dead harness removes the containers with this label."""
        return {"docker": {"stack_id": self.stack_id}}

    def up(self, *names: str, progress: Progress | None = None) -> DockerStack:
        """Start the services as Stack.up does, after checking their images exist."""
        wanted = start_order(names or default_services())
        missing = missing_images(self.client, sorted({image_for(n) for n in wanted}))
        if missing:
            raise ServiceError(
                f"the docker backend's images {', '.join(missing)} are not built: run "
                "`bash scripts/docker-images` (it builds them once from docker/*.Dockerfile)"
            )
        super().up(*names, progress=progress)
        return self

    def down(self) -> None:
        """Stop the services as Stack.down does, then remove every container of the
        stack, whatever state it was left in."""
        super().down()
        remove_containers(self.client, stack_containers(self.client, self.stack_id))


def leftovers(client: Any, keep: Iterable[Path] = ()) -> list[Any]:
    """Containers of driftlab stacks whose folder no longer holds a state file (their
    harness died and its temporary folder is gone), except the folders in `keep`."""
    kept = {str(Path(p).absolute()) for p in keep}
    found = []
    for container in stack_containers(client):
        root = container.labels.get(LABEL_ROOT, "")
        if root not in kept and not (Path(root) / STATE_FILE).exists():
            found.append(container)
    return found


def down_all(root: Path) -> list[str]:
    """`driftlab down --backend docker`: stop the stack in `root` (if any) and remove
    every container of it and of dead stacks; returns the removed containers' names."""
    client = docker_client()
    removed: list[str] = []
    if (Path(root) / STATE_FILE).exists():
        stack = DockerStack.attach(root)
        removed += [c.name for c in stack_containers(client, stack.stack_id)]
        stack.down()
    removed += remove_containers(client, leftovers(client))
    return removed
