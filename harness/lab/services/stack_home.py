"""Where a user's stack lives when no command names one: one folder per user, whatever
the current folder (a per-folder default started a new stack in every project)."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "DRIFTLAB_STACK_DIR"

ROOT_STACK_DIR = Path("/var/lib/driftlab/stack")
"""root's stack: not under /root (mode 700), which PostgreSQL's unprivileged account,
that root's stacks run it as, cannot enter."""


def default_stack_dir() -> Path:
    """The user's stack folder: $DRIFTLAB_STACK_DIR, else for root /var/lib/driftlab/stack,
    else $XDG_STATE_HOME/driftlab/stack (~/.local/state/driftlab/stack)."""
    given = os.environ.get(ENV, "").strip()
    if given:
        return Path(given).expanduser().absolute()
    if os.geteuid() == 0:
        return ROOT_STACK_DIR
    state = os.environ.get("XDG_STATE_HOME", "").strip()
    # The XDG spec ignores a relative $XDG_STATE_HOME.
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local/state"
    return base / "driftlab" / "stack"


def is_default(root: Path) -> bool:
    """Whether `root` is the user's default stack folder (then `driftlab up` needs no
    --dir to start it)."""
    return Path(root).absolute() == default_stack_dir()
