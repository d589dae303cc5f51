"""The analysis on a Spark standalone cluster, by number of workers.

`python -m benchmarks.cluster_bench [--events 20M] [--workers 1,2] [--dir DIR] [--no-duckdb]`

Generates one synthetic history with planted anomalies (the streaming generator, in a
process of its own so that its peak memory is its own; a complete history of the same
size and seed already in DIR is used again), then for each worker count starts a
master and that many workers (1 core each, from the pip-installed pyspark,
driftlab.harness.lab.testing.spark_cluster), runs `driftlab analyze --spark-master` on the history
in
a process of its own, and stops the cluster. Prints, per worker count, the load before
and after, the whole process's time, the pass's time (analysis.json `checkers_s`),
events/s, the peak resident memory of the driver (its Python and its JVM) and of the
largest executor (its JVM and its Python workers), whether the planted counts were
found, and the DuckDB reference's time on the same file for the ratio. Figures, not
pass/fail; also saved to DIR/cluster-<events>.json. On this 2-core machine 2 workers
are all the cores there are: the drop from 1 to 2 is the figure; more workers only
share them.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from benchmarks.__main__ import _size, bench_parser, comma_list
from benchmarks.checkers_bench import PLANT_EACH
from benchmarks.duckdb_reference import run_checks
from benchmarks.process_memory import PeakMemory
from driftlab.checkers.analysis_files import read_analysis
from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.testing.spark_cluster import standalone_cluster
from driftlab.harness.lab.testing.synthetic import expected_counts, generate

EXECUTOR_MEMORY = "1g"
"""Each worker's memory for executors, and so each executor's JVM heap (Spark's default
spark.executor.memory): the rows pass through the Python workers and files, not the
executor's JVM."""
MIB = 1 << 20


@dataclass
class ClusterFigures:
    """One worker count's run."""

    workers: int
    events: int
    process_s: float
    pass_s: float
    found_planted: bool
    found: dict[str, int]
    driver_peak_mib: float
    executor_peak_mib: float
    load_before: float
    load_after: float


@dataclass
class Generated:
    """The history the runs judge: its events, and the generation's seconds and peak
    resident memory (None when a complete history was there already)."""

    events: int
    seconds: float | None
    peak_mib: float | None


def _plant() -> dict[str, int]:
    return {k: PLANT_EACH for k in ALL_KINDS}


def _complete(run: Path, events: int) -> bool:
    """Whether `run` holds a whole history generated for `events` (same seed, plants)."""
    folder = RunDir(run)
    try:
        config = json.loads(folder.config.read_text())
        pq.read_metadata(folder.parquet)  # a history cut off while written has no footer
    except (OSError, ValueError):
        return False
    params = config.get("params", {})
    return (
        config.get("seed") == events
        and params.get("events") == events
        and params.get("plant") == _plant()
    )


def history(run: Path, events: int, console: Console) -> Generated:
    """The synthetic history of `events` (seed `events`, PLANT_EACH of every kind) in
    `run`: made in a child process unless already complete."""
    if _complete(run, events):
        n = pq.read_metadata(RunDir(run).parquet).num_rows
        console.print(f"{n:,} events: the history in {run} is used again")
        return Generated(n, None, None)
    load = os.getloadavg()[0]
    console.print(f"generating about {events:,} events in {run} (load {load:.1f})")
    started = time.perf_counter()
    child = multiprocessing.get_context("spawn").Process(
        target=generate, args=(run, events, events, _plant())
    )
    child.start()
    child.join()
    seconds = time.perf_counter() - started
    if child.exitcode != 0:
        raise SystemExit(f"generating the history failed (exit {child.exitcode})")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / MIB
    n = pq.read_metadata(RunDir(run).parquet).num_rows
    console.print(f"  {n:,} events in {seconds:.1f}s, peak resident memory {peak:,.0f} MiB")
    return Generated(n, seconds, peak)


def measure(run: Path, workers: int, expected: dict[str, int], console: Console) -> ClusterFigures:
    """Analyse `run` on a fresh cluster of `workers` one-core workers (its daemons'
    logs beside the run, in spark-<workers>w/)."""
    base = run.parent / f"spark-{workers}w"
    load_before = os.getloadavg()[0]
    with (
        standalone_cluster(base, workers=workers, memory=EXECUTOR_MEMORY) as cluster,
        PeakMemory() as memory,
    ):
        for n, pid in enumerate(cluster.worker_pids):
            memory.track(f"executor-{n}", pid, own=False)
        driftlab = Path(sys.executable).parent / "driftlab"
        started = time.perf_counter()
        proc = subprocess.Popen(
            [str(driftlab), "analyze", str(run), "--spark-master", cluster.url],
            env=cluster.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        memory.track("driver", proc.pid)
        try:
            out, _ = proc.communicate()
        finally:
            # An interrupt sent to this process alone (kill -INT) must not leave the
            # driver running against a cluster that is about to stop.
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)
        process_s = time.perf_counter() - started
    # Exit 1 is a verdict (planted anomalies are unexpected); 2 and 3 are failures.
    if proc.returncode not in (0, 1):
        raise SystemExit(f"analyze on {workers} worker(s) failed:\n{out}")
    analysis = read_analysis(RunDir(run).analysis)
    found = {k: analysis.counts.get(k, 0) for k in expected}
    executors = [v for k, v in memory.peaks.items() if k.startswith("executor-")]
    figures = ClusterFigures(
        workers=workers,
        events=analysis.history.events,
        process_s=process_s,
        pass_s=analysis.timings.checkers_s,
        found_planted=found == expected,
        found=found,
        driver_peak_mib=memory.peaks["driver"] / MIB,
        executor_peak_mib=max(executors) / MIB,
        load_before=load_before,
        load_after=os.getloadavg()[0],
    )
    console.print(
        f"  {workers} worker(s): {process_s:.1f}s (pass {figures.pass_s:.1f}s), driver peak "
        f"{figures.driver_peak_mib:,.0f} MiB, executor peak {figures.executor_peak_mib:,.0f} "
        f"MiB, planted found: {figures.found_planted}; load {load_before:.1f} -> "
        f"{figures.load_after:.1f}; logs in {base}"
    )
    return figures


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
    parser.add_argument(
        "--no-duckdb",
        action="store_true",
        help="leave out the DuckDB reference (at 100M it wants memory a shared machine "
        "may not have)",
    )
    args = parser.parse_args(argv)
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    console.print(f"[dim]{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}[/]")
    run = args.dir / f"cluster-{args.events}"
    gen = history(run, args.events, console)
    expected = expected_counts(_plant())
    duck_s = None
    if not args.no_duckdb:
        started = time.perf_counter()
        run_checks(RunDir(run).parquet, run / "duckdb-anomalies.parquet")
        duck_s = time.perf_counter() - started
        console.print(f"DuckDB reference {duck_s:.1f}s")
    figures = []
    for n in args.workers:
        figures.append(measure(run, n, expected, console))
        _save(args.dir / f"cluster-{args.events}.json", gen, duck_s, figures)
    table = Table(
        title=f"analysis of {gen.events:,} events on a standalone cluster "
        f"(executors of {EXECUTOR_MEMORY} heap, 1 core each)",
        title_justify="left",
    )
    cols = ("workers", "load", "process", "pass", "pass events/s", "pass/duckdb")
    for col in (*cols, "driver peak", "executor peak", "planted found"):
        table.add_column(col, justify="right")
    for f in figures:
        table.add_row(
            str(f.workers),
            f"{f.load_before:.1f}-{f.load_after:.1f}",
            f"{f.process_s:.1f}s",
            f"{f.pass_s:.1f}s",
            f"{f.events / f.pass_s:,.0f}",
            f"{f.pass_s / duck_s:.2f}x" if duck_s else "-",
            f"{f.driver_peak_mib:,.0f} MiB",
            f"{f.executor_peak_mib:,.0f} MiB",
            f"yes ({sum(f.found.values())})" if f.found_planted else "NO",
        )
    console.print(table)
    return figures


def _save(path: Path, gen: Generated, duck_s: float | None, figures: list[ClusterFigures]) -> None:
    """The figures so far, as JSON: a long run's first worker count survives the next."""
    out = {"generated": asdict(gen), "duckdb_s": duck_s, "runs": [asdict(f) for f in figures]}
    path.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
