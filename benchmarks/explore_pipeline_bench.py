"""Figures for `driftlab explore pipeline.toml`: runs to the first failure and to the
minimal schedule, for the guided search and for plain random clock-time schedules of
the same vocabulary (`--plain`), with the same seeds and budget, side by side.

    .venv/bin/python benchmarks/explore_pipeline_bench.py --stack-dir DIR
        [--seeds 1,2,3] [--runs 30 | --budget 5m] [--duration 6s] [FILE]

FILE defaults to examples/catch_up/pipeline-bug.toml (copied to a temporary folder, so
that the found files land there). Each exploration runs as a user runs it, a process of
its own on the running stack of `driftlab up --dir DIR`; the figures are read from its
RUNS_DIR/explore/<file>-<seed>.jsonl. Prints figures only; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DRIFTLAB = Path(sys.executable).with_name("driftlab")
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "catch_up" / "pipeline-bug.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=EXAMPLE)
    parser.add_argument("--stack-dir", type=Path, required=True, help="a running stack")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--budget", help="a wall-time budget, e.g. 5m")
    parser.add_argument("--runs", default="30", help="a budget of runs (default: 30)")
    parser.add_argument("--duration", default="6s")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="driftlab-bench-explore-"))
    folder = work / args.file.parent.name
    shutil.copytree(args.file.parent, folder)
    target = folder / args.file.name
    print(
        f"{'seed':>4} {'search':<7} {'first':>5} {'minimal':>7} {'runs':>4} "
        f"{'faults':>6} {'rate':>6} {'wall':>6}  load"
    )
    for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
        for mode in ("guided", "plain"):
            runs = work / f"runs-{mode}"
            argv = [
                str(DRIFTLAB),
                "explore",
                str(target),
                "--seed",
                str(seed),
                *(["--budget", args.budget] if args.budget else ["--runs", args.runs]),
                "--duration",
                args.duration,
                "--stack-dir",
                str(args.stack_dir),
                "--runs-dir",
                str(runs),
                "--out",
                str(folder / f"found-{mode}-{seed}.toml"),
            ]
            if mode == "plain":
                argv.append("--plain")
            subprocess.run(argv, capture_output=True, check=False)
            log = runs / "explore" / f"{target.stem}-{seed}.jsonl"
            result = json.loads(log.read_text().splitlines()[-1])
            found = folder / f"found-{mode}-{seed}.toml"
            faults = found.read_text().count("[[faults]]") if found.exists() else "-"
            fails, tries = result["rate"]
            rate = f"{fails}/{tries}" if tries else "-"
            print(
                f"{seed:>4} {mode:<7} {result['first_failure'] or '-':>5} "
                f"{result['minimal_at'] or '-':>7} {result['runs']:>4} {faults:>6} "
                f"{rate:>6} {result['wall_s']:>5.0f}s  {os.getloadavg()[0]:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
