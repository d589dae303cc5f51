"""What a small run waits for its verdict.

- warm: `analyze` of a 10k-event history again and again in one process (the suite, the
  matrix, the pytest plugin keep one SparkSession), the median of several;
- cold: `driftlab analyze RUN` of a small run (3.4k events) as a new process, beside a
  cold trivial Spark job (a new process that starts a session, counts 1000 rows and
  stops), the two alternated A B A B so that the machine's load falls on both alike;
  medians and their ratio, quiet and again beside CPU hogs (`yes > /dev/null`), with
  the load average seen during each set.

The issue's targets: warm <= 0.5 s; cold <= 1.5x the trivial job, at load 0-2 and at
load 8-12.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.load import cpu_hogs
from driftlab.checkers.analyze import analyze
from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.harness.lab.testing.synthetic import generate

EVENTS = 10_000
COLD_EVENTS = 3_400
"""A small run's history, as the claims suite's runs record (the issue's 3.4k events)."""
HOGS = (0, 8)
SETTLE_S = 120.0
"""Seconds the hogs run before the first cold pair, for the load average to feel them:
the 1-minute average climbs to about 63% of the new load in a minute, so after 30 s
the first pair beside 8 hogs started at load 4."""
TRIVIAL_JOB = (
    "from driftlab.checkers.session import get_spark\n"
    "spark = get_spark()\n"
    "assert spark.range(1000).count() == 1000\n"
    "spark.stop()\n"
)


@dataclass
class Cold:
    """Cold pairs beside `hogs` CPU hogs: seconds of each, and the 1-minute load average
    before each pair and after the last."""

    hogs: int
    analyze: list[float]
    trivial: list[float]
    loads: list[float]

    @property
    def ratio(self) -> float:
        """Cold analyze over the cold trivial job (medians)."""
        return statistics.median(self.analyze) / statistics.median(self.trivial)


@dataclass
class Latency:
    """Seconds: every sample, to quote medians and spreads."""

    events: int
    cold_events: int
    warm: list[float]
    cold: list[Cold]


def _timed(argv: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t


def measure(
    root: Path,
    master: str | None,
    rounds: int = 3,
    warm_runs: int = 5,
    hogs: tuple[int, ...] = HOGS,
    console: Console | None = None,
) -> Latency:
    """Generate a 10k-event run and a small one under `root`, time the first's analysis
    warm and the second's cold beside each number of CPU hogs of `hogs`; each figure is
    printed on `console` as it comes (a set of cold pairs takes minutes under load)."""
    say = console.print if console is not None else (lambda _: None)
    run = root / "latency-10k"
    syn = generate(run, EVENTS, seed=7, plant={k: 2 for k in ALL_KINDS})
    analyze(run, master)  # the session's first job, and the Parquet conversion, off the clock
    warm = []
    for _ in range(warm_runs):
        t = time.perf_counter()
        analyze(run, master)
        warm.append(time.perf_counter() - t)
        say(f"  warm analyze, 10k events: {warm[-1]:.2f}s")
    small = root / "latency-small"
    cold_events = generate(small, COLD_EVENTS, seed=7, plant={k: 1 for k in ALL_KINDS}).events
    driftlab = Path(sys.executable).parent / "driftlab"
    cli = [str(driftlab), "analyze", str(small)]
    if master:
        cli += ["--spark-master", master]
    trivial = [sys.executable, "-c", TRIVIAL_JOB]
    sets = []
    for n in hogs:
        with cpu_hogs(n):
            time.sleep(SETTLE_S if n else 0)
            cold = Cold(n, [], [], [])
            for _ in range(rounds):
                cold.loads.append(os.getloadavg()[0])
                cold.analyze.append(_timed(cli, root))
                cold.trivial.append(_timed(trivial, root))
                say(
                    f"  {n} CPU hogs, load {cold.loads[-1]:.1f}: cold analyze "
                    f"{cold.analyze[-1]:.2f}s, cold trivial job {cold.trivial[-1]:.2f}s"
                )
            cold.loads.append(os.getloadavg()[0])
        sets.append(cold)
    return Latency(syn.events, cold_events, warm, sets)


def report(f: Latency, console: Console) -> None:
    """The latency table: medians, min-max, the load, and each cold ratio."""
    table = Table(title="a small run's verdict", title_justify="left")
    for col in ("what", "events", "median", "min-max", "runs", "load"):
        table.add_column(col, justify="right")
    rows = [("analyze, warm session", f.events, f.warm, "")]
    for c in f.cold:
        load = f"{min(c.loads):.1f}-{max(c.loads):.1f}"
        beside = f", {c.hogs} CPU hogs" if c.hogs else ", quiet"
        rows.append((f"driftlab analyze, cold process{beside}", f.cold_events, c.analyze, load))
        rows.append((f"trivial Spark job, cold process{beside}", 0, c.trivial, load))
    for what, events, xs, load in rows:
        table.add_row(
            what,
            f"{events:,}" if events else "",
            f"{statistics.median(xs):.2f}s",
            f"{min(xs):.2f}-{max(xs):.2f}s",
            str(len(xs)),
            load,
        )
    console.print(table)
    for c in f.cold:
        console.print(
            f"cold analyze / cold trivial job, {c.hogs} CPU hogs: [bold]{c.ratio:.2f}x[/] "
            f"(medians, A B A B; load {min(c.loads):.1f}-{max(c.loads):.1f})"
        )
