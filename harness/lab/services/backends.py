"""Which Stack class a stack folder needs: the one place that knows both backends."""

from __future__ import annotations

from pathlib import Path

from driftlab.harness.lab.services.docker_backend import DockerStack
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.services.stack_state import STATE_FILE, read_state


def attach_stack(root: Path, cls: type[Stack] = Stack) -> Stack:
    """The stack described by `root/stack.json`, its live processes adopted (see
    `Stack.attach`). A stack the docker backend started is attached as a DockerStack,
    whichever class is asked: its services are containers, which only it can stop."""
    path = Path(root) / STATE_FILE
    if path.exists() and read_state(path).get("docker"):
        return DockerStack.attach(root)
    return cls.attach(root)
