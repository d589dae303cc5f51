"""Which stack a run uses: the caller's, a running `driftlab up` stack, or its own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def stack_for(
    services: tuple[str, ...], stack: Any, log_dir: Path, tick: Any = None
) -> Iterator[Any]:
    """Yield a stack running `services`.

    A `stack` given by the caller is used as is (the suite shares one). Otherwise a
    stack left running by `driftlab up` is reused, or one is started for this run and
    stopped when the run ends, whatever happens, so no server outlives it.
    """
    if stack is not None:
        ensure = getattr(stack, "ensure", None)
        if ensure is not None:
            ensure(services)
        yield stack
        return
    from harness.services.stack import Stack

    running = Stack.reuse()
    if running is not None:
        running.ensure(services)
        yield running
        return
    if tick:
        tick("stack", 0.0, None)
    own = Stack.start(services)
    try:
        yield own
    finally:
        own.stop()
