"""The run directory: `runs/<scenario>/<UTC time>-<seed>/`, its config.json, runs/latest."""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

CONFIG_NAME = "config.json"
LATEST = "latest"


def utc_stamp() -> str:
    """Compact UTC time of now, as used in run folder names."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def create_run_dir(runs_dir: Path, scenario: str, seed: int) -> Path:
    """Create a fresh run folder with `history/` and `logs/` inside, and point
    `runs_dir/latest` at it.

    The folder is returned absolute and resolved: it is handed to child processes
    (CDC consumers, workers) that run in other working directories, and into
    generated configs, where a relative path would point nowhere.
    """
    runs_dir = Path(runs_dir).resolve()
    base = runs_dir / scenario
    base.mkdir(parents=True, exist_ok=True)
    stamp = utc_stamp()
    run_dir = base / f"{stamp}-{seed}"
    n = 1
    while True:
        try:
            run_dir.mkdir()
            break
        except FileExistsError:
            # Two runs of one scenario and seed within a second: keep both.
            n += 1
            run_dir = base / f"{stamp}-{seed}.{n}"
    (run_dir / "history").mkdir()
    (run_dir / "logs").mkdir()
    point_latest(runs_dir, run_dir)
    return run_dir


def point_latest(runs_dir: Path, run_dir: Path) -> None:
    """Atomically replace the `latest` symlink (relative, so the tree can move)."""
    link = runs_dir / LATEST
    tmp = runs_dir / f".{LATEST}.{secrets.token_hex(4)}"
    os.symlink(os.path.relpath(run_dir, runs_dir), tmp)
    os.replace(tmp, link)


def write_config(run_dir: Path, config: dict[str, Any]) -> Path:
    """Write config.json (atomically: a reader never sees half a file)."""
    path = run_dir / CONFIG_NAME
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(config, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
    return path


def namespace_for(scenario: str) -> str:
    """A lower-case SQL identifier unique to the run, for its tables, keys and topics."""
    slug = re.sub(r"[^a-z0-9]+", "_", scenario.lower()).strip("_")[:24]
    return f"dl_{slug}_{secrets.token_hex(4)}"
