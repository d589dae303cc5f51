"""Steps a signal must not cut in half: a process launched but not yet recorded would
outlive the run that stops it. Inside `uninterrupted()` the run's signal handler
(driftlab.harness.lab.runner.signals) only notes the signal; it is raised as KeyboardInterrupt when
the outermost such block ends."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

_depth = 0
_pending = False


def in_progress() -> bool:
    """Whether the main thread is inside `uninterrupted()`: a handler then calls
    `postpone()` instead of raising."""
    return _depth > 0


def postpone() -> None:
    """Raise KeyboardInterrupt when the outermost `uninterrupted()` block ends."""
    global _pending
    _pending = True


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """The block runs to its end in the main thread whatever signal comes; a postponed
    interrupt is raised after it (not over an exception already on its way)."""
    global _depth, _pending
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers run in the main thread only
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
    if _depth == 0 and _pending:
        _pending = False
        raise KeyboardInterrupt


@contextlib.contextmanager
def finalizer_interrupts(ours: Callable[[], bool]) -> Iterator[list[bool]]:
    """During the block, a KeyboardInterrupt that a finalizer (`__del__`, a weakref
    callback) ignored is noted, not printed with its traceback, when `ours()` says a
    handler of the caller's raised it: Python runs a signal handler wherever the main
    thread is, and drops what a finalizer raises. The list yielded holds one item per
    interrupt so lost; the caller raises it again."""
    hook = sys.unraisablehook
    lost: list[bool] = []

    def note(info: Any) -> None:
        if issubclass(info.exc_type, KeyboardInterrupt) and ours():
            lost.append(True)
            return
        hook(info)

    sys.unraisablehook = note
    try:
        yield lost
    finally:
        sys.unraisablehook = hook
