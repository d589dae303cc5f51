"""What a small run waits for its verdict: the analysis of a 10k-event history.

- warm: `analyze` again and again in one process (the suite, the matrix, the pytest
  plugin keep one SparkSession), the median of several;
- cold: `driftlab analyze RUN` as a new process, beside a cold trivial Spark job (a new
  process that starts a session, counts 1000 rows and stops), the two alternated A B A B
  so that the machine's load falls on both alike; medians and their ratio.

The issue's targets: warm <= 1.5 s; cold <= 2x the trivial job.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from checkers.analyze import analyze
from checkers.anomaly import ALL_KINDS
from harness.testing.synthetic import generate

EVENTS = 10_000
TRIVIAL_JOB = (
    "from checkers.session import get_spark\n"
    "spark = get_spark()\n"
    "assert spark.range(1000).count() == 1000\n"
    "spark.stop()\n"
)


@dataclass
class Latency:
    """Seconds: every sample, to quote medians and spreads."""

    events: int
    warm: list[float]
    cold_analyze: list[float]
    cold_trivial: list[float]

    @property
    def ratio(self) -> float:
        """Cold analyze over the cold trivial job (medians)."""
        return statistics.median(self.cold_analyze) / statistics.median(self.cold_trivial)


def _timed(argv: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t


def measure(root: Path, master: str | None, rounds: int = 3, warm_runs: int = 5) -> Latency:
    """Generate a 10k-event run under `root` and time its analysis warm and cold."""
    run = root / "latency-10k"
    syn = generate(run, EVENTS, seed=7, plant={k: 2 for k in ALL_KINDS})
    analyze(run, master)  # the session's first job, and the Parquet conversion, off the clock
    warm = []
    for _ in range(warm_runs):
        t = time.perf_counter()
        analyze(run, master)
        warm.append(time.perf_counter() - t)
    driftlab = Path(sys.executable).parent / "driftlab"
    cli = [str(driftlab), "analyze", str(run)]
    if master:
        cli += ["--spark-master", master]
    trivial = [sys.executable, "-c", TRIVIAL_JOB]
    cold, base = [], []
    for _ in range(rounds):
        cold.append(_timed(cli, root))
        base.append(_timed(trivial, root))
    return Latency(syn.events, warm, cold, base)


def report(f: Latency, console: Console) -> None:
    """The latency table: medians, min-max, and the cold ratio."""
    table = Table(title=f"a small run's verdict ({f.events:,} events)", title_justify="left")
    for col in ("what", "median", "min-max", "runs"):
        table.add_column(col, justify="right")
    for what, xs in (
        ("analyze, warm session", f.warm),
        ("driftlab analyze, cold process", f.cold_analyze),
        ("trivial Spark job, cold process", f.cold_trivial),
    ):
        table.add_row(
            what, f"{statistics.median(xs):.2f}s", f"{min(xs):.2f}-{max(xs):.2f}s", str(len(xs))
        )
    console.print(table)
    console.print(f"cold analyze / cold trivial job: [bold]{f.ratio:.2f}x[/] (medians, A B A B)")
