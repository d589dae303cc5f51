"""Load on the machine for the benchmarks that quote a figure beside CPU hogs."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator


@contextlib.contextmanager
def cpu_hogs(n: int) -> Iterator[None]:
    """`n` busy processes (`yes > /dev/null`), killed when the block ends."""
    hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
