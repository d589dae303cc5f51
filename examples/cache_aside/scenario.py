"""The cache-aside scenario, and a command to run it:

    .venv/bin/python examples/cache_aside/scenario.py --seed 1 [--duration 8]

It runs like any built-in scenario (the runner, the nemesis, the checkers) and writes
runs/cache-aside-race/<UTC time>-<seed>/ with its report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The example lives outside the package: its own folder on sys.path, also when this
# file is loaded by path. driftlab comes from the install, never from the checkout
# (whose driftlab/ folder holds only the facade).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cache_aside import CacheAside  # registers the setup

from driftlab import ABSENT, PRESENT, Scenario, WorkloadSpec
from driftlab.harness.app.run import run_scenario

SCENARIO = Scenario(
    name="cache-aside-race",
    setup=CacheAside.name,
    summary=(
        "Clients write and read a few hot keys through a cache-aside Redis cache. A reader "
        "fills the cache with a row it read before a concurrent write's invalidation: the "
        "cache keeps the old value."
    ),
    setup_params={"fill_delay_ms": 5},
    workload=WorkloadSpec(
        clients=6,
        keys=3,
        distribution="uniform",
        mix={"write": 0.3, "read": 0.7},
        read_own=False,
        read_stores=["cache"],
        rate=400,
        duration=8,
        rotate_s=0.5,
    ),
    # A cache legitimately lacks keys it was never asked for: `missing` is not judged.
    expectations={"stale": PRESENT, "phantom": ABSENT},
)


def main() -> int:
    """Run the scenario once; the exit status is the runner's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--duration", type=float, default=None, help="seconds of workload")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"))
    parser.add_argument("--no-analyze", action="store_true", help="record, do not judge")
    args = parser.parse_args()
    sc = SCENARIO.with_overrides(duration=args.duration)
    result = run_scenario(sc, seed=args.seed, runs_dir=args.runs_dir, analyze=not args.no_analyze)
    print(f"{result.run_dir}: {result.verdict or result.error} ({result.stats.ops} ops)")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
