"""`python -m benchmarks [--sizes 1M,5M,20M] [--dir DIR] [--spark-master URL] [--run-cost]
[--stack-dir DIR] [--views [--views-events 1M]] [--cluster 100M] [--hogs 0,8]`."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rich.console import Console

from benchmarks import jepsen_bench, latency_bench
from benchmarks.checkers_bench import main

T = TypeVar("T")


def _size(text: str) -> int:
    """1M, 500k, 20000 -> events."""
    t = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(t[-1:], 1)
    try:
        return int(float(t.rstrip("km")) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 1M or 500k") from None


def _positive(text: str) -> int:
    """A whole number of at least 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return n


def _count(text: str) -> int:
    """A whole number of at least 0."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 0")
    return n


def comma_list(item: Callable[[str], T]) -> Callable[[str], list[T]]:
    """An argparse type for a comma-separated list whose items `item` parses."""
    return lambda text: [item(x) for x in text.split(",")]


def bench_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark of synthetic histories takes:
    `--dir`, their scratch folder."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "driftlab-bench",
        help="where the synthetic histories go (default: $TMPDIR/driftlab-bench; "
        "about 1 GB at 20M)",
    )
    return parser


def cli(argv: list[str] | None = None) -> None:
    """Parse the arguments and run the checker benchmark."""
    parser = bench_parser(
        "python -m benchmarks",
        "Time the analysis of a small run (10k events, warm and cold), then "
        "the checker suite in Spark beside a DuckDB SQL reference on synthetic histories "
        "with planted anomalies.",
    )
    parser.add_argument(
        "--sizes",
        default="1M,5M,20M",
        type=comma_list(_size),
        help="history sizes in events (default: 1M,5M,20M)",
    )
    parser.add_argument("--spark-master", default=None, help="Spark master URL")
    parser.add_argument(
        "--repeats",
        type=_positive,
        default=3,
        help="runs of each engine per size, in turns; the table shows medians (default: 3)",
    )
    parser.add_argument(
        "--no-latency",
        action="store_true",
        help="skip the small-run latency figures (10k events, warm and cold; the 32k-line "
        "Maelstrom history imported and judged)",
    )
    parser.add_argument(
        "--run-cost",
        action="store_true",
        help="also time warm pipeline runs beyond their workload, quiet and beside two CPU "
        "hogs (benchmarks.run_cost_bench; on the stack of --stack-dir, else one of its own)",
    )
    parser.add_argument("--stack-dir", type=Path, help="the running stack of --run-cost")
    parser.add_argument(
        "--views",
        action="store_true",
        help="also time analyze of a history with transactions and a view store against "
        "the same events without views (benchmarks.views_bench)",
    )
    parser.add_argument(
        "--views-events", type=_size, default=1_000_000, help="events of --views (default: 1M)"
    )
    parser.add_argument(
        "--cluster",
        type=_size,
        metavar="EVENTS",
        help="also analyse a history of EVENTS (e.g. 100M) on a standalone cluster of 1, "
        "then 2 one-core workers this command starts (benchmarks.cluster_bench, without "
        "its DuckDB reference; long: 100M is over an hour on a loaded 2-core machine "
        "and needs about 13 GB of disk while it runs)",
    )
    parser.add_argument(
        "--hogs",
        type=comma_list(_count),
        default=list(latency_bench.HOGS),
        help="CPU hogs beside the cold small-run pairs, one set of pairs per number (default: 0,8)",
    )
    args = parser.parse_args(argv)
    if args.views:
        from benchmarks import views_bench

        views_bench.measure(args.dir, args.views_events, args.repeats)
    if args.cluster:
        from benchmarks import cluster_bench

        cluster_bench.main(["--events", str(args.cluster), "--dir", str(args.dir), "--no-duckdb"])
    if args.run_cost:
        from benchmarks import run_cost_bench

        stack = ["--stack-dir", str(args.stack_dir)] if args.stack_dir else []
        run_cost_bench.cli(["--dir", str(args.dir), *stack])
    if not args.no_latency:
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
        args.dir.mkdir(parents=True, exist_ok=True)
        figures = latency_bench.measure(
            args.dir, args.spark_master, hogs=tuple(args.hogs), console=console
        )
        latency_bench.report(figures, console)
        jepsen_bench.maelstrom(args.dir / "maelstrom", rounds=3)
    main(args.sizes, args.dir, args.spark_master, args.repeats)


if __name__ == "__main__":
    cli(sys.argv[1:])
