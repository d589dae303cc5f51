"""Figures for a pipeline file on a running stack: seconds from `driftlab run
pipeline.toml` to its verdict, as a user runs it (a new process each time).

    .venv/bin/python benchmarks/pipeline_bench.py [--stack-dir DIR] [--rounds 5]
        [--duration 10s] [FILE]

FILE defaults to examples/pg_to_redis/pipeline.toml, run with `--duration 10s` (a 10 s
workload, three fault windows). Without --stack-dir the benchmark starts a stack as a
user would (`driftlab up --dir TMP --only postgres,redis,analysis`, not timed) and
stops it at the end; with it, that running stack is used. Prints each round's wall
time, where it was analysed (the stack's warm Spark or this process's), the run's own
split (workload to verdict, analysis) from logs/run.json, the load average, and the
median. With --in-process the rounds run in this one process instead, as a test
session does. Prints figures only; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

DRIFTLAB = Path(sys.executable).with_name("driftlab")
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis" / "pipeline.toml"
SERVICES = "postgres,redis,analysis"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=EXAMPLE)
    parser.add_argument("--stack-dir", type=Path, help="a running stack (default: one of its own)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", default="10s", help="the workload's (default: 10s)")
    parser.add_argument("--in-process", action="store_true", help="one process, warm Spark")
    args = parser.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="driftlab-bench-pipeline-"))
    with running_stack(args.stack_dir) as stack_dir:
        if args.in_process:
            in_process(args.file, stack_dir, args.rounds, runs)
        else:
            whole_processes(args.file, stack_dir, args.rounds, args.duration, runs)


@contextlib.contextmanager
def running_stack(given: Path | None, services: str = SERVICES) -> Iterator[Path]:
    """The running stack `given`, or one of `services` started for the benchmark, then
    stopped and its folder removed."""
    if given is not None:
        yield given
        return
    # PostgreSQL runs as an unprivileged account that must enter every parent folder.
    root = Path(tempfile.mkdtemp(prefix="driftlab-bench-stack-", dir="/tmp"))
    root.chmod(0o755)
    stack_dir = root / "stack"
    subprocess.run([DRIFTLAB, "up", "--dir", stack_dir, "--only", services], check=True)
    try:
        yield stack_dir
    finally:
        subprocess.run([DRIFTLAB, "down", "--dir", stack_dir], check=False)
        shutil.rmtree(root, ignore_errors=True)


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _where(analysed_on: str | None) -> str:
    return {"server": "on the warm server", "process": "in process"}.get(
        analysed_on or "", "nowhere"
    )


def whole_processes(file: Path, stack_dir: Path, rounds: int, duration: str, runs: Path) -> None:
    """Each round a `driftlab run FILE` process of its own, timed whole."""
    walls = []
    loads = [_load()]
    for i in range(rounds):
        begun = time.monotonic()
        done = subprocess.run(
            [
                str(DRIFTLAB),
                "run",
                str(file),
                "--duration",
                duration,
                "--stack-dir",
                str(stack_dir),
                "--runs-dir",
                str(runs),
                "--seed",
                str(i),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
        )
        wall = time.monotonic() - begun
        walls.append(wall)
        loads.append(_load())
        summaries = sorted(runs.glob("*/*/logs/run.json"), key=lambda p: p.stat().st_mtime)
        s = json.loads(summaries[-1].read_text()) if summaries else {}
        print(
            f"round {i + 1}: {wall:.1f} s to the verdict (exit {done.returncode}, "
            f"verdict {s.get('verdict')}, analysed {_where(s.get('analysed_on'))}); the run's "
            f"own wall {s.get('wall_s')} s, analysis {s.get('analysis_s')} s, "
            f"{s.get('ops')} ops; load average {loads[-1]}"
        )
    print(
        f"median of {len(walls)}: {statistics.median(walls):.1f} s "
        f"(min {min(walls):.1f}, max {max(walls):.1f}; {file.name}, --duration {duration}); "
        f"load average (1/5/15 min) {loads[0]} before, {loads[-1]} after"
    )


def in_process(file: Path, stack_dir: Path, rounds: int, runs: Path) -> None:
    """The rounds in this process: the first pays Spark's start, the others do not."""
    from driftlab.harness.app.pipeline import run_pipeline
    from driftlab.harness.lab.runner.stack_use import stack_at
    from driftlab.scenarios.pipeline.spec import load

    stack = stack_at(stack_dir)
    walls = []
    for i in range(rounds):
        begun = time.monotonic()
        out = run_pipeline(load(file), seed=i, runs_dir=runs, stack=stack)
        wall = time.monotonic() - begun
        walls.append(wall)
        r = out.run
        print(
            f"round {i + 1} (in process): {wall:.1f} s to the verdict ({r.verdict}); "
            f"analysis {r.analysis_s:.1f} s, {r.stats.ops} ops"
        )
    print(f"median of rounds 2..{rounds}: {statistics.median(walls[1:] or walls):.1f} s")


if __name__ == "__main__":
    main()
