"""Helpers for tests that wire a setup onto the session stack (imported, not a plugin)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.history.recorder import Recorder
from harness.history.schema import RunHeader
from harness.setups.base import SetupContext, namespace_for


def make_context(stack: object, tmp_path: Path, name: str, **params: object) -> SetupContext:
    """A fresh namespace, a recorder in `tmp_path/run` and the setup's parameters."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    rec = Recorder(run_dir, RunHeader(name, name, 0))
    return SetupContext(
        namespace=namespace_for(name),
        stack=stack,
        recorder=rec,
        work_dir=run_dir,
        params=dict(params),
    )


def events(ctx: SetupContext) -> list[dict[str, object]]:
    """Every event recorded so far (flushes the recorder first)."""
    rec = ctx.recorder
    rec.flush()  # type: ignore[attr-defined]
    out: list[dict[str, object]] = []
    for seg in sorted((ctx.work_dir / "history").glob("*.jsonl")):
        out += [json.loads(line) for line in seg.read_text().splitlines() if line]
    return out
