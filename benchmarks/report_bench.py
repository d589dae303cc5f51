"""Figures for the HTML run report: its size and render time against the history's size.

    .venv/bin/python benchmarks/report_bench.py [--events 5000000] [--dir DIR] [--reuse]

Generates a synthetic run with every anomaly kind planted (harness/lab/testing/synthetic/),
analyses it (Spark, several minutes at 5M events on two cores), renders report.html and
prints the report's size, the render time and the time of the filtered history read of
the sequence diagrams. `--reuse` renders an already analysed run in DIR again. Prints
figures only; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from driftlab.checkers.analysis_files import read_analysis, read_examples
from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.testing.synthetic import expected_counts, generate_history
from driftlab.reports.run_report import render_run_report
from driftlab.reports.sequence import pick_targets, read_key_events


def main(argv: list[str] | None = None) -> None:
    """Generate, analyse and render; print the figures."""
    parser = argparse.ArgumentParser(prog="benchmarks/report_bench.py")
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument(
        "--dir", type=Path, default=Path(tempfile.gettempdir()) / "driftlab-report-bench"
    )
    parser.add_argument("--reuse", action="store_true", help="render DIR's analysed run again")
    args = parser.parse_args(argv)
    run = args.dir
    if not (args.reuse and RunDir(run).analysis.exists()):
        from driftlab.checkers.analyze import analyze

        plant = {kind: 20 for kind in ALL_KINDS}
        expect = {k: "present" for k, n in expected_counts(plant).items() if n}
        t = time.perf_counter()
        generate_history(run, args.events, seed=1, plant=plant, expectations=expect)
        print(f"generated {args.events:,} events in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        analyze(run)
        print(f"analysed in {time.perf_counter() - t:.1f} s")
    events = read_analysis(RunDir(run).analysis).history.events
    examples = read_examples(RunDir(run).examples)
    keys = sorted({t[0] for t in pick_targets(examples)})
    t = time.perf_counter()
    read_key_events(RunDir(run).parquet, keys)
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    report = render_run_report(run)
    render_s = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"history {events:,} events: report.html {report.stat().st_size / 1024:.0f} kB, "
        f"rendered in {render_s:.1f} s; the filtered read of {len(keys)} keys' events "
        f"alone (first, cold) {read_s:.1f} s; peak RSS {rss:.0f} MB"
    )


if __name__ == "__main__":
    main()
