"""The cost of judging view stores: `driftlab analyze` of a history with transactions
and a view store, against the same events judged without views.

    python -m benchmarks --views [--views-events 1M] [--repeats 3]
    python -m benchmarks.views_bench [--events 1M] [--repeats 3] [--dir DIR]

Writes two runs with harness/lab/testing/views.py from one seed: `views` (the header names
the view store `docs`) and `plain` (the same events, no `params.views`: the keys are
plain keys of every store, the store's samples without a version go unjudged), then
times a cold `driftlab analyze` of each in turns and prints the medians and their
ratio. Prints figures only; nothing passes or fails.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.__main__ import _positive, _size, bench_parser
from driftlab.harness.lab.testing.views import PLANTABLE, generate_views

STORES = ("docs",)
"""One view store: without views, a second would be judged on the first's keys."""


def prepare(root: Path, events: int) -> dict[str, Path]:
    """The two runs of `events` events under `root`, by name."""
    runs = {}
    for name, views in (("views", True), ("plain", False)):
        run = generate_views(
            root / f"views-{events}-{name}",
            events,
            seed=1,
            plant={k: 20 for k in PLANTABLE},
            stores=STORES,
            views=views,
        )
        runs[name] = run.run_dir
    return runs


def _analyze(run: Path) -> float:
    """Seconds of one cold `driftlab analyze` of `run` (its exit status is the verdict's)."""
    driftlab = Path(sys.executable).parent / "driftlab"
    t = time.perf_counter()
    subprocess.run([str(driftlab), "analyze", str(run)], capture_output=True, check=False)
    return time.perf_counter() - t


def measure(root: Path, events: int, repeats: int) -> None:
    """Time both runs' analyses, in turns, and print the medians and their ratio."""
    runs = prepare(root, events)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name].append(_analyze(run))
    views, plain = (statistics.median(times[n]) for n in ("views", "plain"))
    load = os.getloadavg()[0]
    print(f"view stores, {events:,} events (load average {load:.1f} on {os.cpu_count()} cores)")
    print(f"  analyze with views    {views:8.1f} s (median of {repeats})")
    print(f"  analyze without views {plain:8.1f} s (median of {repeats})")
    print(f"  ratio                 {views / plain:8.2f}")


def cli(argv: list[str] | None = None) -> None:
    """Parse the arguments and run the benchmark."""
    parser = bench_parser("python -m benchmarks.views_bench", __doc__.splitlines()[0])
    parser.add_argument("--events", type=_size, default=1_000_000, help="default: 1M")
    parser.add_argument("--repeats", type=_positive, default=3, help="default: 3")
    parser.add_argument(
        "--prepare", action="store_true", help="only write the two runs and print their folders"
    )
    args = parser.parse_args(argv)
    if args.prepare:
        for name, run in prepare(args.dir, args.events).items():
            print(name, run)
        return
    measure(args.dir, args.events, args.repeats)


if __name__ == "__main__":
    cli(sys.argv[1:])
