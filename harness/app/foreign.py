"""Histories other tools recorded, imported as run folders of their own
(`driftlab analyze --from jepsen`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from driftlab.harness.history.exitcodes import BadInput
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.importers.jepsen import (
    SCENARIO,
    ImportSummary,
    JepsenImportError,
    import_history,
)

FOREIGN = ("jepsen",)
"""The tools whose histories driftlab imports."""


def check_foreign(tool: str, source: Path) -> None:
    """BadInput, naming the fix, unless `source` is a non-empty file of a known tool:
    checked before a run folder exists, as an empty history is no run."""
    if tool not in FOREIGN:
        raise BadInput(f"--from {tool}: unknown; the tools are {', '.join(FOREIGN)}")
    if not source.is_file():
        raise BadInput(f"{source}: no such file; pass a Jepsen history.edn or .json")
    if source.stat().st_size == 0:
        raise BadInput(f"{source} is empty; pass a Jepsen history.edn or .json")


def import_foreign(
    tool: str,
    source: Path,
    runs_dir: Path,
    wrap: Callable[[BinaryIO], BinaryIO] | None = None,
) -> tuple[RunDir, ImportSummary]:
    """Import `source`, a history `tool` recorded, into a new run folder under
    `runs_dir`; BadInput when it cannot be read, and then no run folder is left.
    `wrap` wraps the file's bytes as they are read (a progress bar's reader)."""
    check_foreign(tool, source)
    run_dir = RunDir.create(runs_dir, SCENARIO, 0)
    try:
        summary = import_history(source, run_dir.path, wrap=wrap)
    except JepsenImportError as exc:
        # Half a history is no run: nothing may analyse it later as if it were one.
        run_dir.discard()
        raise BadInput(str(exc)) from None
    return run_dir, summary
