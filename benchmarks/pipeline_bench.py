"""Figures for a pipeline file on a running stack: seconds from `driftlab run
pipeline.toml` to its verdict, as a user runs it (a new process each time).

    .venv/bin/driftlab up --dir DIR --only postgres,redis,analysis
    .venv/bin/python benchmarks/pipeline_bench.py --stack-dir DIR [--rounds 3] [FILE]

FILE defaults to examples/pg_to_redis/pipeline.toml (a 10 s workload, three fault
windows). With --in-process the rounds run in this one process instead, as a test
session does: Spark stays warm after the first round's analysis. Prints each round's
wall time, the run's own split (workload to verdict, analysis) from logs/run.json, and
the median. Prints figures only; nothing here
passes or fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DRIFTLAB = Path(sys.executable).with_name("driftlab")
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis" / "pipeline.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=EXAMPLE)
    parser.add_argument("--stack-dir", type=Path, required=True, help="a running stack")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-process", action="store_true", help="one process, warm Spark")
    args = parser.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="driftlab-bench-pipeline-"))
    if args.in_process:
        in_process(args.file, args.stack_dir, args.rounds, runs)
        return
    walls = []
    for i in range(args.rounds):
        begun = time.monotonic()
        done = subprocess.run(
            [
                str(DRIFTLAB),
                "run",
                str(args.file),
                "--stack-dir",
                str(args.stack_dir),
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
        summaries = sorted(runs.glob("*/*/logs/run.json"), key=lambda p: p.stat().st_mtime)
        s = json.loads(summaries[-1].read_text()) if summaries else {}
        print(
            f"round {i + 1}: {wall:.1f} s to the verdict (exit {done.returncode}, "
            f"verdict {s.get('verdict')}); the run's own wall {s.get('wall_s')} s, "
            f"analysis {s.get('analysis_s')} s, {s.get('ops')} ops"
        )
    print(f"median of {len(walls)}: {statistics.median(walls):.1f} s ({args.file.name})")


def in_process(file: Path, stack_dir: Path, rounds: int, runs: Path) -> None:
    """The rounds in this process: the first pays Spark's start, the others do not."""
    from harness.app.pipeline import run_pipeline
    from harness.pipeline.spec import load
    from harness.runner.stack_use import stack_at

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
