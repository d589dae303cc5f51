"""Helpers for tests that wire a setup onto the session stack (imported, not a plugin)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.schema import RunHeader
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.setups.base import Setup, SetupContext, namespace_for


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


@contextlib.contextmanager
def running(
    setup: Setup, stack: Stack, tmp_path: Path, name: str, **params: object
) -> Iterator[SetupContext]:
    """`setup` prepared on a fresh context (its services up) and started; torn down, and
    its recorder closed, on the way out."""
    stack.up(*setup.services)
    ctx = make_context(stack, tmp_path, name, **params)
    setup.prepare(ctx)
    try:
        setup.start()
        yield ctx
    finally:
        setup.teardown()
        ctx.recorder.close()  # type: ignore[attr-defined]


def write_then_delete(setup: Setup, timeout: float) -> dict[str, dict[str, tuple[str, int | None]]]:
    """Through one client `c0`: `k` written a-1, a-2, a-3; `j` written b-1 and deleted.
    The final states once the setup has quiesced (within `timeout`)."""
    client = setup.client("c0")
    for v in ("a-1", "a-2", "a-3"):
        client.write("k", v)
    client.write("j", "b-1")
    client.delete("j")
    client.close()
    assert setup.quiesce(timeout)
    return setup.final_states()


def events(ctx: SetupContext) -> list[dict[str, object]]:
    """Every event recorded so far (flushes the recorder first)."""
    rec = ctx.recorder
    rec.flush()  # type: ignore[attr-defined]
    out: list[dict[str, object]] = []
    for seg in sorted((ctx.work_dir / "history").glob("*.jsonl")):
        out += [json.loads(line) for line in seg.read_text().splitlines() if line]
    return out


def children() -> set[int]:
    """The pids of this process's living children (application instances, consumers)."""
    me = os.getpid()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                # The fields after the command (which may hold spaces): state, ppid, ...
                fields = stat[stat.rindex(")") + 2 :].split()
                if int(fields[1]) == me and fields[0] != "Z":
                    found.add(int(entry.name))
    return found


def cmdline(pid: int) -> str:
    """A process's command line, arguments separated by spaces."""
    return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
