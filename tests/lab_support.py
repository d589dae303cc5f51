"""The `driftlab` command on a stack of `driftlab up --dir`, which the tests do not own:
its folder, bringing it up, and what a command said."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cli_support import DRIFTLAB


def driftlab(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`driftlab *args`, its output captured."""
    return subprocess.run(
        [DRIFTLAB, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def output(done: subprocess.CompletedProcess[str]) -> str:
    """What a command wrote, stdout then stderr, its white space folded."""
    return " ".join((done.stdout + done.stderr).split())


def up(root: Path, services: str) -> str:
    """`driftlab up` of `services` (comma-separated) in `root`, which must succeed; what
    it said."""
    done = driftlab("up", "--dir", str(root), "--only", services)
    assert done.returncode == 0, done.stdout + done.stderr
    return output(done)


@contextmanager
def stack_folder() -> Iterator[Path]:
    """A fresh folder for a stack; whatever stack runs in it is brought down at the end
    and the folder removed."""
    # Not tmp_path: PostgreSQL's unprivileged account must enter every parent folder.
    root = Path(tempfile.mkdtemp(prefix="driftlab-stack-test-", dir="/tmp"))
    try:
        yield root
    finally:
        driftlab("down", "--dir", str(root))
        shutil.rmtree(root, ignore_errors=True)
