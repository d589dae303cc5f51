"""The Docker engine, short folders and docker stacks the docker backend's tests share.

scripts/bootstrap --docker (make test) starts the engine and builds the images; a
machine without them fails these tests with the fix, never skips them."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.containers import docker_client, missing_images
from driftlab.harness.lab.services.docker_backend import DockerStack


def docker_engine(images: Iterable[str]) -> Any:
    """The Docker engine with driftlab's `images` built: a test failure naming the fix
    otherwise."""
    try:
        client = docker_client()
    except ServiceError as exc:
        pytest.fail(f"the docker backend's tests need a Docker engine: {exc}")
    missing = missing_images(client, list(images))
    if missing:
        pytest.fail(f"images {', '.join(missing)} are missing: run bash scripts/docker-images")
    return client


@contextlib.contextmanager
def short_folder() -> Iterator[Path]:
    """A folder of a short path (PostgreSQL's socket path is bounded) that the services'
    unprivileged account can enter; removed after the block."""
    path = Path(tempfile.mkdtemp(prefix="dl-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def docker_stack_in(engine: Any, folder: Path) -> Iterator[DockerStack]:
    """A docker stack of its own in `folder`/stack, brought down after the block."""
    stack = DockerStack(folder / "stack", owned=True, client=engine)
    try:
        yield stack
    finally:
        stack.down()
