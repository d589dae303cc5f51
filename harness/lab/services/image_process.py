"""A user's program shipped as an image, run as a container on the docker backend.

`ImageProcess` is a `CommandProcess` whose every start is a fresh container of the
user's image (its entry point, `argv` as the container's arguments), so the nemesis and
the watchdog treat it like a command on this machine:

- kill is SIGKILL to the container (every process in it), pause and resume the cgroup
  freezer (docker pause/unpause), a restart a new container with the same config;
- host networking, so the links on 127.0.0.1 the environment names are reached as a
  local process reaches them; `--init` as PID 1, so a graceful stop's SIGTERM reaches
  the program whatever its image's entry point;
- its output (stdout and stderr, what `docker logs` shows) appended to the same log
  file in the run folder a command would write, where log readiness reads it;
- labelled with the stack's id and folder (containers.LABEL_STACK, LABEL_ROOT), so the
  stack's `down` and the reaper of a dead harness remove it with the stack's own.

Unlike driftlab's images (driftlab.harness.lab.services.containers), the user's image knows nothing
of driftlab: no entry script, no stack folder mounted, its own user and folder.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.command import CommandProcess
from driftlab.harness.lab.services.containers import ContainerProcess, ContainerRuntime
from driftlab.harness.lab.services.process import SupervisedProcess

LABEL_PROCESS = "driftlab.process"  # the pipeline process a container runs


def has_image(client: Any, image: str) -> bool:
    """Whether the engine has `image` already: no registry is asked (a pull could wait
    long, or reach outside this machine)."""
    from docker.errors import ImageNotFound

    try:
        client.images.get(image)
    except ImageNotFound:
        return False
    return True


def _follow(container: Any, log_path: Path) -> None:
    """Append the container's output to `log_path` until the container ends."""
    from docker.errors import DockerException

    try:
        with open(log_path, "ab") as log:
            for chunk in container.logs(stream=True, follow=True):
                log.write(chunk)
                log.flush()
    except (DockerException, OSError):
        pass  # removed meanwhile (a stop, a `down`): its output ends there


class ImageRuntime(ContainerRuntime):
    """Runs one user's image: its containers are named `driftlab-<stack>-<prefix>-<name>`
    (`prefix`: the run's namespace, so two runs on one stack never meet)."""

    def __init__(self, client: Any, sid: str, root: Path, image: str, prefix: str) -> None:
        super().__init__(client, sid, root, image)
        self.prefix = prefix

    def container_name(self, process: str) -> str:
        return f"driftlab-{self.sid}-{self.prefix}-{process}"

    def create(
        self,
        process: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None,
        cwd: Path | None,
        user: str | None,
    ) -> Any:
        """Start a container of the image with `argv` as its arguments (none: its own
        command); its output is followed into `log_path`. `cwd` and `user` are the
        image's own."""
        command = list(argv) or None
        labels = {LABEL_PROCESS: process}
        container = self.run_container(process, self.image, command, dict(env or {}), labels=labels)
        threading.Thread(
            target=_follow, args=(container, log_path), name=f"log-{process}", daemon=True
        ).start()
        return container


@dataclass(eq=False)  # a service is compared and hashed by identity
class ImageProcess(CommandProcess):
    """A CommandProcess run as a container of `runtime`'s image (see the module): `argv`
    is the container's arguments, `env` its whole environment."""

    runtime: ImageRuntime | None = field(default=None, kw_only=True)

    def _new_process(self) -> SupervisedProcess:
        if self.runtime is None:
            raise ServiceError(f"{self.name}: an image process needs the docker backend")
        # Named after the process, not the instance: a restart removes the crashed
        # container (its output is already in the log) before it starts the next.
        return ContainerProcess(
            self.runtime,
            self.name,
            self.argv,
            self.log_path,
            env=self.env,
            stop_timeout=self.stop_timeout,
        )
