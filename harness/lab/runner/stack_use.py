"""Which stack a run uses: the caller's, a running `driftlab up` stack, or its own."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from driftlab.harness.history.exitcodes import BadInput, LabFailure
from driftlab.harness.lab.services.backends import attach_stack
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.services.stack_home import default_stack_dir, is_default
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.harness.lab.services.stack_state import STATE_FILE

log = logging.getLogger("driftlab.runner")

BACKENDS = ("local", "docker")
"""`local`: supervised processes (harness/lab/services); `docker`: the same services in
containers of driftlab's images (harness/lab/services/docker_backend.py)."""


def check_backend(backend: str) -> str:
    """The backend name, or ValueError naming the choices."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use --backend local or --backend docker")
    return backend


@contextlib.contextmanager
def open_stack(backend: str = "local") -> Iterator[Stack]:
    """An owned, not yet started stack of `backend` for a session of runs (the suite,
    the matrix, a pytest session); `up` starts what each run needs. Stopped at the end.

    The docker backend fails here, before any run, when no Docker engine answers.
    """
    docker = check_backend(backend) == "docker"
    # PostgreSQL runs as an unprivileged account that must enter every parent folder.
    root = Path(tempfile.mkdtemp(prefix="driftlab-stack-", dir="/tmp"))
    root.chmod(0o755)
    try:
        stack = _new_stack(root, docker)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    try:
        yield stack
    finally:
        stack.down()
        shutil.rmtree(root, ignore_errors=True)


def _new_stack(root: Path, docker: bool) -> Stack:
    """An owned stack in the temporary folder `root`: its services in containers
    (`docker`) or as local processes."""
    if docker:
        from driftlab.harness.lab.services.docker_backend import DockerStack

        return DockerStack(root, owned=True, temporary=True)
    return Stack(root, owned=True, temporary=True)


def stack_at(root: Path) -> Stack:
    """The running stack `driftlab up --dir root` started: BadInput when `root` holds no
    stack, LabFailure when some of its services are not running."""
    root = Path(root)
    up = up_command(root)
    if not (root / STATE_FILE).exists():
        raise BadInput(
            f"no stack in {root.absolute()} (no {STATE_FILE}); start one with "
            f"`{up}`, or leave out --stack-dir"
        )
    stack = attach_stack(root)
    stopped = sorted(n for n, s in stack.services.items() if not s.is_running())
    if stopped or not stack.services:
        raise LabFailure(
            f"the stack in {stack.root} is not running (stopped: {', '.join(stopped) or 'all'}); "
            f"start it with `{up}`"
        )
    return stack


def up_command(root: Path) -> str:
    """The command that starts the stack in `root`: a plain `driftlab up` for the user's
    default folder."""
    return "driftlab up" if is_default(root) else f"driftlab up --dir {root}"


def running_stack(root: Path | None = None) -> Stack | None:
    """The stack `driftlab up` left running in `root` (default: the user's stack
    folder, driftlab.harness.lab.services.stack_home), or None."""
    root = default_stack_dir() if root is None else root
    if not (root / STATE_FILE).exists():
        return None
    stack = attach_stack(root)
    return stack if stack.is_up() else None


@contextlib.contextmanager
def acquire_stack(
    services: Iterable[str], stack: ServiceStack | None = None, backend: str = "local"
) -> Iterator[ServiceStack]:
    """Yield a stack running `services`.

    A `stack` given by the caller is used (the suite shares one). Otherwise, with the
    docker backend, an own stack of containers; with the local one, the stack a plain
    `driftlab up` left running in the user's stack folder is reused, or one is started in
    a temporary folder and stopped when the block ends, whatever happens, so no server
    outlives it.
    """
    if stack is None and check_backend(backend) == "docker":
        with open_stack("docker") as docker_stack:
            docker_stack.up(*services)
            yield docker_stack
        return
    own_root: Path | None = None
    if stack is None:
        stack = running_stack()
    if stack is None:
        # PostgreSQL runs as an unprivileged account that must enter every parent folder.
        own_root = Path(tempfile.mkdtemp(prefix="driftlab-stack-", dir="/tmp"))
        own_root.chmod(0o755)
        stack = Stack(own_root, owned=True, temporary=True)
    try:
        stack.up(*services)
        yield stack
    finally:
        if own_root is not None:
            stack.down()
            shutil.rmtree(own_root, ignore_errors=True)


def stack_used(stack: ServiceStack) -> dict[str, Any]:
    """Which stack a run used, for logs/run.json: its folder, and whether it outlives
    the command (a `driftlab up` stack) or is the command's own, stopped with it."""
    return {"dir": str(stack.root), "own": bool(getattr(stack, "owned", True))}


def stack_line(used: dict[str, Any]) -> str:
    """The terminal's line for `stack_used`'s answer."""
    if used["own"]:
        return f"stack: its own, in {used['dir']} (stopped when the command ends)"
    return f"stack: {used['dir']} (left running by `driftlab up`)"


@contextlib.contextmanager
def service_logs(stack: ServiceStack, services: Iterable[str], log_dir: Path) -> Iterator[None]:
    """Copy what `services` (and Toxiproxy) log during the block into `log_dir`."""
    offsets = {name: _size(stack[name].log_path) for name in (*services, "toxiproxy")}
    try:
        yield
    finally:
        for name, offset in offsets.items():
            _copy_tail(stack[name].log_path, offset, log_dir / f"{name}.log")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _copy_tail(src: Path, offset: int, dst: Path) -> None:
    with contextlib.suppress(OSError), src.open("rb") as fin, dst.open("wb") as fout:
        fin.seek(offset)
        shutil.copyfileobj(fin, fout)
