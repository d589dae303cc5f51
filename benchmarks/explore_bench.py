"""Figures for the driftlab simulator and its Hypothesis search.

    .venv/bin/python benchmarks/explore_bench.py [--examples 500] [--seeds 5]

Per setup: schedules/s of the simulator alone, examples/s of the search loop (Hypothesis
generation + simulator + tally), and the cost of the reference checkers on the same
histories (why the loop tallies and the checkers judge only the minimal schedule). Then
the time to find and shrink the Figure 11-4 race from fresh seeds. Wall-clock and CPU
seconds both: the machine may be shared. Prints figures only; nothing passes or fails.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from driftlab.harness.lab.explore.properties import PROPERTIES, Property, reference_anomalies
from driftlab.harness.lab.explore.search import search
from driftlab.harness.lab.explore.strategies import step_table
from driftlab.scenarios.catalogue.architectures import SIMULATED_SETUPS


@dataclass(frozen=True, slots=True)
class Timing:
    """Wall-clock and CPU seconds of one measured step."""

    wall: float
    cpu: float

    def rate(self, n: int) -> str:
        return f"{n / self.wall:>8,.0f}/s wall {n / self.cpu:>8,.0f}/CPU-s"


def timed(fn: Callable[[], object]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500, help="search examples per setup")
    parser.add_argument("--seeds", type=int, default=5, help="fresh seeds for Figure 11-4")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    # The checkers' imports, outside the timing.
    reference_anomalies(SIMULATED_SETUPS["dual-write"].run([]).events)
    print(f"{'setup':22} {'simulator (20 steps)':>38} {'search loop':>38} {'checkers':>14}")
    for name, spec in SIMULATED_SETUPS.items():
        table, rnd = step_table(spec), random.Random(0)
        scheds = [[rnd.choice(table) for _ in range(20)] for _ in range(args.examples)]
        sim = timed(lambda s=scheds, sp=spec: [sp.run(x) for x in s])
        # A property nothing breaks: the search runs every example and never shrinks.
        never = Property("bench", name, "-", "-", "holds", frozenset())
        loop = timed(lambda p=never, sp=spec: search(sp, p, examples=args.examples, seed=0))
        runs = [spec.run(x).events for x in scheds[:50]]
        check = timed(lambda r=runs: [reference_anomalies(e) for e in r])
        print(
            f"{name:22} {sim.rate(args.examples)} {loop.rate(args.examples)} "
            f"{check.cpu / len(runs) * 1e3:>6.2f} CPU-ms"
        )
    race = PROPERTIES[0]
    walls, cpus, sizes = [], [], []
    for seed in random.Random().sample(range(2**32), args.seeds):
        start_cpu = time.process_time()
        result = search(SIMULATED_SETUPS[race.setup], race, 500, seed)
        cpus.append(time.process_time() - start_cpu)
        walls.append(result.seconds)
        sizes.append(len(result.run.executed) - 1 if result.run else -1)
    print(
        f"Figure 11-4 from {args.seeds} fresh seeds: find + shrink median "
        f"{statistics.median(walls):.2f} s wall (max {max(walls):.2f}), "
        f"{statistics.median(cpus):.2f} CPU-s; minimal steps {sorted(set(sizes))}"
    )


if __name__ == "__main__":
    main()
