"""The analysis on a Spark standalone cluster, by number of workers.

`python -m benchmarks.cluster_bench [--events 20M] [--workers 1,2] [--dir DIR]`

Generates one synthetic history with planted anomalies, then for each worker count
starts a master and that many workers (1 core each, from the pip-installed pyspark,
harness.testing.spark_cluster), runs `driftlab analyze --spark-master` on the history in
a process of its own, and stops the cluster. Prints, per worker count, the whole
process's time, the pass's time (analysis.json `checkers_s`), events/s, whether the
planted counts were found, and the DuckDB reference's time on the same file for the
ratio. Figures, not pass/fail. On this 2-core machine 2 workers are all the cores there
are: the drop from 1 to 2 is the figure; more workers only share them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.__main__ import _size, bench_parser, comma_list
from benchmarks.checkers_bench import PLANT_EACH
from benchmarks.duckdb_reference import run_checks
from checkers.anomaly import ALL_KINDS
from harness.rundir import RunDir
from harness.testing.spark_cluster import standalone_cluster
from harness.testing.synthetic import generate


@dataclass
class ClusterFigures:
    """One worker count's run."""

    workers: int
    events: int
    process_s: float
    pass_s: float
    found_planted: bool


def measure(run: Path, workers: int, expected: dict[str, int], console: Console) -> ClusterFigures:
    """Analyse `run` on a fresh cluster of `workers` one-core workers (its daemons'
    logs beside the run, in spark-<workers>w/)."""
    base = run.parent / f"spark-{workers}w"
    with standalone_cluster(base, workers=workers) as cluster:
        driftlab = Path(sys.executable).parent / "driftlab"
        started = time.perf_counter()
        done = subprocess.run(
            [str(driftlab), "analyze", str(run), "--spark-master", cluster.url],
            env=cluster.env,
            capture_output=True,
            text=True,
            check=False,
        )
        process_s = time.perf_counter() - started
    # Exit 1 is a verdict (planted anomalies are unexpected); 2 and 3 are failures.
    if done.returncode not in (0, 1):
        raise SystemExit(f"analyze on {workers} worker(s) failed:\n{done.stdout}{done.stderr}")
    analysis = json.loads(RunDir(run).analysis.read_text())
    found = {k: analysis["counts"].get(k, 0) for k in expected}
    console.print(f"  {workers} worker(s): {process_s:.1f}s, logs in {base}")
    return ClusterFigures(
        workers=workers,
        events=analysis["history"]["events"],
        process_s=process_s,
        pass_s=analysis["timings"]["checkers_s"],
        found_planted=found == expected,
    )


def main(argv: list[str] | None = None) -> list[ClusterFigures]:
    """Parse the arguments, run each worker count, print the table."""
    parser = bench_parser(
        "python -m benchmarks.cluster_bench",
        "Time the analysis of one synthetic history on a Spark standalone "
        "cluster of 1, 2, ... one-core workers, beside the DuckDB reference.",
    )
    parser.add_argument("--events", type=_size, default=_size("20M"), help="default 20M")
    parser.add_argument(
        "--workers",
        default="1,2",
        type=comma_list(int),
        help="worker counts to run, one cluster each (default 1,2)",
    )
    args = parser.parse_args(argv)
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    console.print(f"[dim]{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}[/]")
    run = args.dir / f"cluster-{args.events}"
    syn = generate(run, args.events, seed=args.events, plant={k: PLANT_EACH for k in ALL_KINDS})
    expected = {k: syn.expected[k] for k in ALL_KINDS}
    started = time.perf_counter()
    run_checks(RunDir(run).parquet, run / "duckdb-anomalies.parquet")
    duck_s = time.perf_counter() - started
    console.print(f"{syn.events:,} events; DuckDB reference {duck_s:.1f}s")
    figures = [measure(run, n, expected, console) for n in args.workers]
    table = Table(title="analysis on a standalone cluster", title_justify="left")
    for col in ("workers", "process", "pass", "pass events/s", "pass/duckdb", "planted found"):
        table.add_column(col, justify="right")
    for f in figures:
        table.add_row(
            str(f.workers),
            f"{f.process_s:.1f}s",
            f"{f.pass_s:.1f}s",
            f"{f.events / f.pass_s:,.0f}",
            f"{f.pass_s / duck_s:.2f}x",
            "yes" if f.found_planted else "NO",
        )
    console.print(table)
    return figures


if __name__ == "__main__":
    main()
