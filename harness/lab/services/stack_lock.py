"""One command at a time on a stack folder: `driftlab up` and `down` hold an exclusive
lock of `<stack>/.lock` (fcntl) while they work, so two started together never both
draw ports and passwords or start the same servers (the second waits, then finds the
first's stack). The lock goes with its process, even a SIGKILLed one."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

LOCK_FILE = ".lock"


@contextlib.contextmanager
def stack_lock(root: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the folder's lock for the block; `on_wait` is called first when another
    process holds it (to say so), then this one waits its turn."""
    fd, taken = open_lock(Path(root) / LOCK_FILE)
    try:
        if not taken:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def open_lock(path: Path) -> tuple[int, bool]:
    """Open lock file `path` (made with its folder when missing) and try its exclusive
    lock without waiting: the descriptor (the caller closes it, which releases the lock)
    and whether the lock was taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return fd, False
    return fd, True
