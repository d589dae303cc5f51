"""The one log set-up: driftlab's log records to a file for a while (a run's
logs/runner.log, an analysis's logs/analyze.log), never to the terminal."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextlib.contextmanager
def log_to(path: Path, *, take_over: Iterable[logging.Logger] = ()) -> Iterator[None]:
    """Send the `driftlab` loggers' records (INFO and up) to `path` inside the block.
    The loggers of `take_over` (a library's own, which would print to stderr) write only
    there for that time."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger("driftlab")
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    taken = list(take_over)
    saved = [lg.handlers for lg in taken]
    for lg in taken:
        lg.handlers = [handler]
    try:
        yield
    finally:
        for lg, handlers in zip(taken, saved, strict=True):
            lg.handlers = handlers
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()
