"""Figures for `driftlab analyze --from jepsen`: how long a large Jepsen kafka history
takes to import and to analyse.

    .venv/bin/python -m benchmarks.jepsen_bench [--ops 1000000] [--dir DIR] [--keep]
    .venv/bin/python -m benchmarks.jepsen_bench --maelstrom [--rounds 3]

Writes a generated history.edn of `--ops` operations (each an invocation and a
completion: two lines, as Jepsen counts them in its history twice that), imports it
(driftlab.harness.lab.importers.jepsen) and runs the analysis (driftlab.checkers.analyze) on the run
folder,
then prints the sizes, the times and the load average. Prints figures only; nothing
here passes or fails.

`--maelstrom` times what issue 39 asks of a real Maelstrom history of 32k lines
(`generate(path, 16000)`: 32,302 lines): Spark started and warmed first, then
`--rounds` times in that one process the import and the judging, each by the clock and
by CPU (the import's own; the judging's with its JVM and Python workers), with the load
average before each round, and their medians.

The history is shaped like the kafka workload's with `:sub-via #{:assign}`: clients
send to and poll 16 keys (one consumer per key at a time, moved between clients now
and then, resuming at its last committed offset), crash now and then (a crashed client
comes back as a new process), and a partition nemesis runs every 10 s; at the end
every consumer polls up to the last acknowledged offset. Planted: one message in 200k
sends that no poll ever returns (a lost write, so a poll skip for its consumer).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

KEYS = 16
CLIENTS = 10
LOST_EVERY = 200_000
MAELSTROM_OPS = 16_000
"""Ops of the Maelstrom-sized history: 32,302 lines, 52,963 events once imported."""


def generate(path: Path, ops: int, seed: int = 1) -> Counter[str]:
    """Write a history of `ops` operations; returns what was planted."""
    rng = random.Random(seed)
    logs: list[list[tuple[int, int]]] = [[] for _ in range(KEYS)]  # (offset, value)
    hidden: set[tuple[int, int]] = set()  # (key, offset) no poll returns
    position = [0] * KEYS  # index into logs[k] of the next message to poll
    owner = [k % CLIENTS for k in range(KEYS)]  # client slot polling key k
    process = list(range(CLIENTS))  # the current Jepsen process of each slot
    planted: Counter[str] = Counter()
    t = 0
    index = 0
    value = 0
    sends = 0
    with path.open("w") as out:

        def line(p: int | str, typ: str, f: str, v: str, extra: str = "") -> None:
            nonlocal t, index
            t += rng.randrange(200_000, 2_000_000)
            out.write(
                f"{{:type :{typ}, :f :{f}, :value {v}, :time {t}, :process {p}, "
                f":index {index}{extra}}}\n"
            )
            index += 1

        def poll(slot: int, keys: list[int]) -> None:
            p = process[slot]
            line(p, "invoke", "poll", "[[:poll]]")
            parts = []
            for k in keys:
                msgs = logs[k][position[k] : position[k] + 4]
                position[k] += len(msgs)
                shown = " ".join(f"[{o} {v}]" for o, v in msgs if (k, o) not in hidden)
                parts.append(f"{k} [{shown}]")
            line(p, "ok", "poll", f"[[:poll {{{' '.join(parts)}}}]]")

        for n in range(ops):
            if n and n % 20_000 == 0:  # ~10-40 s of history: a partition comes or goes
                f = "start-partition" if n % 40_000 else "stop-partition"
                line(":nemesis", "info", f, "nil")
                line(":nemesis", "info", f, '[:isolated {"n1" #{"n2" "n3"}}]')
                continue
            slot = rng.randrange(CLIENTS)
            p = process[slot]
            roll = rng.random()
            if roll < 0.5:
                k = rng.randrange(KEYS)
                value += 1
                line(p, "invoke", "send", f"[[:send {k} {value}]]")
                outcome = rng.random()
                if outcome < 0.005:  # a crashed client: unknown outcome, a new process
                    line(p, "info", "send", f"[[:send {k} {value}]]", ', :error "timeout"')
                    process[slot] += CLIENTS
                    continue
                offset = len(logs[k]) * 2  # sparse offsets, as transactions leave gaps
                logs[k].append((offset, value))
                sends += 1
                if sends % LOST_EVERY == 0:
                    hidden.add((k, offset))
                    planted["lost-message"] += 1
                    planted["poll-skip"] += 1
                line(p, "ok", "send", f"[[:send {k} [{offset} {value}]]]")
            elif roll < 0.99:
                keys = [k for k in range(KEYS) if owner[k] == slot]
                if keys:
                    poll(slot, keys)
                else:
                    line(p, "invoke", "poll", "[[:poll]]")
                    line(p, "ok", "poll", "[[:poll {}]]")
            else:  # a key moves to this client (Jepsen's assign), from its position
                k = rng.randrange(KEYS)
                before, owner[k] = owner[k], slot
                for s in dict.fromkeys((before, slot)):
                    keys = " ".join(str(x) for x in range(KEYS) if owner[x] == s)
                    line(process[s], "invoke", "assign", f"[{keys}]")
                    line(process[s], "ok", "assign", f"[{keys}]")
        # The final polls: every consumer catches up with the acknowledged sends.
        for k in range(KEYS):
            while position[k] < len(logs[k]):
                poll(owner[k], [k])
    planted["ops"] = ops
    planted["lines"] = index
    planted["sends"] = sends
    return planted


@dataclass
class Round:
    """One import and judging of a warm session: seconds by the clock and of CPU."""

    load: float
    import_s: float
    import_cpu_s: float
    judge_s: float
    judge_cpu_s: float

    @property
    def total_s(self) -> float:
        """Import and judging, by the clock."""
        return self.import_s + self.judge_s


def warm_rounds(source: Path, run: Path, rounds: int) -> list[Round]:
    """Import `source` into `run` and judge it `rounds` times in this process, on a
    Spark session started and warmed first (as `driftlab suite` and `run` warm it)."""
    from benchmarks.process_memory import tree_cpu_s
    from driftlab.checkers.analyze import analyze
    from driftlab.checkers.spark_start import start_spark, start_workers
    from driftlab.harness.lab.importers.jepsen import import_history

    start_workers(start_spark(None, source.parent / "spark.log").sparkContext)
    done = []
    for _ in range(rounds):
        shutil.rmtree(run, ignore_errors=True)
        load = os.getloadavg()[0]
        wall, cpu = time.perf_counter(), time.process_time()
        import_history(source, run)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        judged, judged_cpu = time.perf_counter(), tree_cpu_s()
        analyze(run)
        judged, judged_cpu = time.perf_counter() - judged, tree_cpu_s() - judged_cpu
        done.append(Round(load, wall, cpu, judged, judged_cpu))
        print(
            f"load {load:4.1f}  import {wall:5.2f} s ({cpu:4.2f} s CPU)  judge {judged:5.2f} s "
            f"({judged_cpu:4.2f} s CPU with Spark's processes)  total {done[-1].total_s:5.2f} s"
        )
    return done


def maelstrom(base: Path, rounds: int) -> list[Round]:
    """Issue 39's figure: the 32k-line history imported and judged, warm, `rounds`
    times; prints each round and the medians."""
    base.mkdir(parents=True, exist_ok=True)
    source = base / "history.edn"
    planted = generate(source, MAELSTROM_OPS)
    print(
        f"history.edn: {planted['lines']:,} lines ({MAELSTROM_OPS:,} ops); {os.cpu_count()} cores"
    )
    done = warm_rounds(source, base / "run", rounds)
    median = statistics.median
    print(
        f"median of {rounds}: import {median(r.import_s for r in done):.2f} s "
        f"({median(r.import_cpu_s for r in done):.2f} s CPU), judge "
        f"{median(r.judge_s for r in done):.2f} s ({median(r.judge_cpu_s for r in done):.2f} "
        f"s CPU), total {median(r.total_s for r in done):.2f} s (target 10 s); load "
        f"{min(r.load for r in done):.1f}-{max(r.load for r in done):.1f}"
    )
    return done


def main() -> None:
    """Generate, import, analyse, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=None, help="keep the files here")
    parser.add_argument("--keep", action="store_true", help="do not delete the files")
    parser.add_argument(
        "--maelstrom",
        action="store_true",
        help=f"the 32k-line history ({MAELSTROM_OPS:,} ops) imported and judged on a warm "
        "session, --rounds times",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --maelstrom")
    args = parser.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="jepsen-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    if args.maelstrom:
        maelstrom(base, max(1, args.rounds))
        if not (args.keep or args.dir):
            shutil.rmtree(base)
        return
    source = base / "history.edn"
    run = base / "run"
    shutil.rmtree(run, ignore_errors=True)

    from driftlab.checkers.analyze import analyze
    from driftlab.harness.lab.importers.jepsen import import_history

    t = time.perf_counter()
    planted = generate(source, args.ops)
    generated = time.perf_counter() - t
    size = source.stat().st_size
    load = os.getloadavg()
    print(
        f"history.edn: {planted['ops']:,} ops, {planted['lines']:,} lines, "
        f"{planted['sends']:,} sends acknowledged, {size / 2**20:,.0f} MiB "
        f"(generated in {generated:.1f} s); load average {load[0]:.1f} on {os.cpu_count()} cores"
    )
    wall, cpu = time.perf_counter(), time.process_time()
    summary = import_history(source, run)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"import:  {wall:7.1f} s wall, {cpu:7.1f} s CPU  "
        f"{planted['lines'] / wall:10,.0f} lines/s  -> {summary.events:,} events"
    )
    t = time.perf_counter()
    result = analyze(run)
    analysed = time.perf_counter() - t
    timings = result.analysis.timings
    print(
        f"analyze: {analysed:7.1f} s wall (convert {timings.convert_s:.1f} s, "
        f"checkers {timings.checkers_s:.1f} s, outputs {timings.outputs_s:.1f} s)"
    )
    print(f"total:   {wall + analysed:7.1f} s; load average now {os.getloadavg()[0]:.1f}")
    found = {k: n for k, n in result.counts.items() if n}
    print(f"planted: lost-message {planted['lost-message']}, poll-skip {planted['poll-skip']}")
    print(f"found:   {found}; verdict {result.verdict}")
    if not (args.keep or args.dir):
        shutil.rmtree(base)
    else:
        print(f"files in {base}")


if __name__ == "__main__":
    main()
