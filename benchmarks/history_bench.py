"""Figures for the history: recording rate (one thread, several threads) and the rate of
reading JSON-lines segments and converting them to Parquet.

    .venv/bin/python benchmarks/history_bench.py [--events 1000000] [--threads 4]

Prints figures only; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from driftlab.harness.history.reader import convert_to_parquet, read_history
from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.history.schema import RunHeader

HEADER = RunHeader(run_id="bench", scenario="bench", seed=0)


@dataclass(frozen=True, slots=True)
class Timing:
    """Wall-clock and CPU seconds (all threads) of one measured step."""

    wall: float
    cpu: float

    def rates(self, events: int) -> str:
        # CPU-seconds make figures comparable on a machine shared with other work.
        return (
            f"{events / self.wall:>12,.0f} events/s wall, "
            f"{events / self.cpu:>12,.0f} events/CPU-s  ({self.wall:.2f} s)"
        )


def timed(fn: Callable[[], object]) -> Timing:
    """Run fn once and time it."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu)


def record(run: Path, events: int, threads: int) -> None:
    """Record `events` deliver messages from `threads` threads, then end the history."""
    rec = Recorder(run, HEADER, role="bench")
    per_thread = events // threads

    def work(t: int) -> None:
        for i in range(per_thread):
            rec.msg(
                "deliver",
                channel="orders",
                partition=t,
                offset=i,
                msg_id=f"orders/{t}/{i}",
                key=f"k{i % 1000}",
                value=f"c{t}-{i}",
                version=i,
                consumer="cache-sync",
                process=f"consumer-{t}",
                attempt=1,
            )

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    rec.end()


def main() -> None:
    """Run the benchmarks and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    n, threads = args.events, args.threads
    base = Path(tempfile.mkdtemp(prefix="driftlab-history-bench-"))
    try:
        one, many = base / "one", base / "many"
        print(f"{n:,} msg events; load average {os.getloadavg()[0]:.1f}")
        print(f"record, 1 thread:         {timed(lambda: record(one, n, 1)).rates(n)}")
        took = timed(lambda: record(many, n, threads))
        print(f"record, {threads} threads:        {took.rates(n)}")
        size = sum(p.stat().st_size for p in RunDir(one).history.iterdir())
        print(f"read JSONL -> Arrow:      {timed(lambda: read_history(one)).rates(n)}")
        print(f"convert JSONL -> Parquet: {timed(lambda: convert_to_parquet(one)).rates(n)}")
        parquet = RunDir(one).parquet.stat().st_size
        print(f"sizes: {size / 2**20:,.0f} MiB JSONL, {parquet / 2**20:,.1f} MiB Parquet")
        again = timed(lambda: convert_to_parquet(one))
        print(f"convert again (up to date): {again.wall * 1e3:.1f} ms")
    finally:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
