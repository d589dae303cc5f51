"""The `driftlab` command run as a user runs it: this environment's entry point, in a
subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DRIFTLAB = str(Path(sys.executable).parent / "driftlab")


def driftlab(cwd: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`driftlab *args` in `cwd`, its output captured as text; without this
    environment's DRIFTLAB_* settings and with a terminal wide enough for its tables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFTLAB_")}
    env["COLUMNS"] = "120"
    return subprocess.run(
        [DRIFTLAB, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
