"""The checker suite at scale: Spark (`driftlab.checkers.analyze`) beside a DuckDB SQL reference.

For each size, a synthetic history with planted anomalies is generated, then analysed by
Spark (the whole `analyze`, with its per-phase timings) and by
benchmarks/duckdb_reference.py, in the same process, in turns (Spark, DuckDB, Spark,
...; `repeats` of each). Prints the medians, events/s, the Spark/DuckDB ratio of the
medians and whether both found the planted counts every time (and Spark every anomaly
with its evidence events); the first Spark pass of a process, which also starts its
Python workers and warms the JIT, is shown apart. Figures, not pass/fail: the targets at
5M events are within 2x of DuckDB and >= 400,000 events/s. Beside them,
benchmarks/floor_bench.py times one aggregation, one window and one join as identical
SQL in both engines: the ratio any plan made of such steps starts from.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from benchmarks.duckdb_reference import run_checks
from benchmarks.floor_bench import Floor, measure_floor
from driftlab.checkers.analyze import analyze
from driftlab.checkers.anomaly import ALL_KINDS, KINDS
from driftlab.checkers.session import get_spark
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.testing.synthetic import generate

PLANT_EACH = 20


@dataclass
class Figures:
    """One size's measurements (seconds)."""

    events: int
    generate_s: float
    spark_suite_s: float  # the keyed pass (every checker) and its summary: the median
    spark_total_s: float  # the whole analyze, outputs included: the median
    duckdb_s: float  # the median
    spark_runs: list[float]  # every pass, in order: the first in a new session costs more
    duckdb_runs: list[float]
    spark_found_planted: bool
    spark_without_evidence: int  # the most anomalies without evidence events of any pass
    duckdb_found_planted: bool
    spark_checkers: list[str]  # the checkers that ran (missing ones are not timed)
    spark_mismatch: dict[str, list[int]]
    duckdb_mismatch: dict[str, list[int]]
    floors: list[Floor]

    @property
    def spark_eps(self) -> float:
        return self.events / self.spark_suite_s

    @property
    def duckdb_eps(self) -> float:
        return self.events / self.duckdb_s


def measure(
    size: int, root: Path, master: str | None, console: Console, repeats: int = 3
) -> Figures:
    """Generate a history of about `size` events and time both suites on it, `repeats`
    times each, in turns."""
    run = root / f"bench-{size}"
    t = time.perf_counter()
    syn = generate(run, size, seed=size, plant={k: PLANT_EACH for k in ALL_KINDS})
    gen_s = time.perf_counter() - t
    console.print(f"[bold]{syn.events:,} events[/] generated in {gen_s:.1f}s")

    spark_runs, totals, duck_runs = [], [], []
    bare = 0
    spark_bad: dict[str, list[int]] = {}
    duck_bad: dict[str, list[int]] = {}
    for _ in range(repeats):
        result = analyze(run, master, console=console)
        spark_runs.append(result.analysis.timings.checkers_s)
        bare = max(bare, without_evidence(RunDir(run).anomalies))
        totals.append(result.analysis.timings.total_s)
        ran = [n for n, c in result.analysis.checkers.items() if c.status == "ok"]
        judged = [k for n in ran for k in KINDS[n]]
        spark_bad |= {
            k: [result.counts[k], syn.expected[k]]
            for k in judged
            if result.counts[k] != syn.expected[k]
        }

        t = time.perf_counter()
        duck = run_checks(RunDir(run).parquet, run / "duckdb-anomalies.parquet")
        duck_runs.append(time.perf_counter() - t)
        duck_bad |= {
            k: [duck.get(k, 0), syn.expected[k]]
            for k in ALL_KINDS
            if duck.get(k, 0) != syn.expected[k]
        }
        console.print(f"  duckdb         {sum(duck.values()):>8,} anomalies  {duck_runs[-1]:6.1f}s")
    floors = measure_floor(get_spark(master), RunDir(run).parquet)
    return Figures(
        events=syn.events,
        generate_s=gen_s,
        spark_suite_s=statistics.median(spark_runs),
        spark_total_s=statistics.median(totals),
        duckdb_s=statistics.median(duck_runs),
        spark_runs=spark_runs,
        duckdb_runs=duck_runs,
        spark_found_planted=not spark_bad,
        spark_without_evidence=bare,
        duckdb_found_planted=not duck_bad,
        spark_checkers=ran,
        spark_mismatch=spark_bad,
        duckdb_mismatch=duck_bad,
        floors=floors,
    )


def without_evidence(anomalies: Path) -> int:
    """How many anomalies of an `anomalies.parquet` show no evidence event (a verdict
    must show the events behind it, at every size)."""
    column = pq.read_table(anomalies, columns=["evidence"]).column("evidence")
    return sum(1 for e in column.to_pylist() if not e or not json.loads(e))


def report(figures: list[Figures], console: Console) -> None:
    """The side-by-side table."""
    table = Table(title="checker suite: Spark vs DuckDB", title_justify="left")
    for col in (
        "events",
        "generate",
        "spark pass",
        "spark events/s",
        "spark analyze",
        "duckdb",
        "duckdb events/s",
        "spark/duckdb",
        "first pass",
        "planted found",
    ):
        table.add_column(col, justify="right")
    for f in figures:
        found = f"spark {'yes' if f.spark_found_planted else 'NO'}"
        found += ", " if not f.spark_without_evidence else f" ({f.spark_without_evidence} bare), "
        found += f"duckdb {'yes' if f.duckdb_found_planted else 'NO'}"
        table.add_row(
            f"{f.events:,}",
            f"{f.generate_s:.1f}s",
            f"{f.spark_suite_s:.1f}s",
            f"{f.spark_eps:,.0f}",
            f"{f.spark_total_s:.1f}s",
            f"{f.duckdb_s:.1f}s",
            f"{f.duckdb_eps:,.0f}",
            f"{f.spark_suite_s / f.duckdb_s:.2f}x",
            f"{f.spark_runs[0]:.1f}s",
            found,
        )
    console.print(table)
    console.print(
        "[dim]medians of the runs (each size: Spark, DuckDB, Spark, ... in turns); "
        "first pass: Spark's first of the size, which in a new session also starts "
        "the Python workers; 'N bare': N of Spark's anomalies without evidence[/]"
    )
    floor = Table(title="one pass of each kind, identical SQL", title_justify="left")
    for col in ("events", "query", "spark", "duckdb", "spark/duckdb", "counts agree"):
        floor.add_column(col, justify="right")
    for f in figures:
        for q in f.floors:
            floor.add_row(
                f"{f.events:,}",
                q.query,
                f"{q.spark_s:.2f}s",
                f"{q.duckdb_s:.2f}s",
                f"{q.ratio:.1f}x",
                "yes" if q.spark_count == q.duckdb_count else "NO",
            )
    console.print(floor)
    for f in figures:
        if len(f.spark_checkers) < len(KINDS):
            missing = sorted(set(KINDS) - set(f.spark_checkers))
            console.print(f"[yellow]{f.events:,}: Spark checkers missing: {', '.join(missing)}")
        for who, bad in (("spark", f.spark_mismatch), ("duckdb", f.duckdb_mismatch)):
            if bad:
                console.print(f"[red]{f.events:,}: {who} counts [found, planted]: {bad}")
        if f.spark_without_evidence:
            console.print(
                f"[red]{f.events:,}: {f.spark_without_evidence} of Spark's anomalies "
                "without evidence events"
            )


def main(sizes: list[int], root: Path, master: str | None, repeats: int = 3) -> list[Figures]:
    """Run the benchmark for each size; print and save (root/results.json) the figures."""
    # Piped to a file (CI logs, `| tee`), rich would fold the 9-column table to 80
    # columns and cut every figure short.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    root.mkdir(parents=True, exist_ok=True)
    console.print(
        f"[dim]{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; "
        f"histories under {root}[/]"
    )
    figures = []
    for size in sizes:
        figures.append(measure(size, root, master, console, repeats))
        report(figures, console)
    (root / "results.json").write_text(
        json.dumps(
            [asdict(f) | {"spark_eps": f.spark_eps, "duckdb_eps": f.duckdb_eps} for f in figures],
            indent=2,
        )
    )
    return figures
