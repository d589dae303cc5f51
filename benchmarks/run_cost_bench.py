"""What a warm pipeline run costs beyond its workload: the figure an exploration's
number of runs depends on (`driftlab explore` runs one per candidate schedule).

`python -m benchmarks.run_cost_bench [--stack-dir DIR] [--rounds 5] [--duration 3s]
[--hogs 0,2] [--process] [FILE ...]`

Each round runs FILE once for D (--duration) on a running stack whose warm Spark judges
it, timed whole; its cost is that wall time less D. By default the rounds run in this
one process, as `driftlab explore` runs its candidates (after one run not counted, which
pays the imports); with --process each is a `driftlab run` process of its own. The
rounds run quiet, then beside N CPU hogs (`yes > /dev/null`, killed after) for each N of
--hogs. Prints each round's split from the run's own records (the history's marks,
logs/run.json, the files' times): start (the command's imports, with --process), ready
(prepare and the processes' readiness), overrun (the workload past D), converge (the
convergence wait), final (the final reads), teardown, analysis, report and exit; then
the median of the rounds against the target of 10 s, with the load average. Without
--stack-dir it starts a stack (`driftlab up --only postgres,redis,toxiproxy,analysis`,
not timed) and stops it after. FILE defaults to examples/pg_to_redis/pipeline.toml
(passes) and pipeline-bug.toml (fails: a store that does not converge waits out the
convergence window). Figures only: nothing here passes or fails.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.__main__ import _positive, bench_parser, comma_list
from benchmarks.load import cpu_hogs
from benchmarks.pipeline_bench import running_stack
from driftlab.checkers.analysis_files import read_analysis
from driftlab.checkers.verdict import shown_verdict
from driftlab.harness.cli.common import parse_duration
from driftlab.harness.history.rundir import SUMMARY_JSON, RunDir

SUMMARIES = f"*/*/logs/{SUMMARY_JSON}"
"""Every run folder's logs/run.json under a runs folder."""

DRIFTLAB = Path(sys.executable).with_name("driftlab")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis"
# The example passes; its planted bug fails, and a failing run waits out the convergence
# window: an exploration shrinking a failure runs many of those.
FILES = [EXAMPLES / "pipeline.toml", EXAMPLES / "pipeline-bug.toml"]
SERVICES = "postgres,redis,toxiproxy,analysis"
TARGET_S = 10.0


@dataclass
class Round:
    """One run: its wall time, verdict (as the reader is told it) and split."""

    wall_s: float
    duration_s: float
    verdict: str | None
    exit_code: int
    phases: dict[str, float]
    load: float

    @property
    def cost_s(self) -> float:
        """Wall time beyond the workload's duration."""
        return self.wall_s - self.duration_s

    def line(self) -> str:
        """One line a person reads."""
        split = ", ".join(f"{k} {v:.2f}" for k, v in self.phases.items())
        return (
            f"{self.cost_s:5.2f} s beyond the workload (wall {self.wall_s:.2f} s; exit "
            f"{self.exit_code}, {self.verdict}; load {self.load:.1f}): {split}"
        )


def _marks(run: Path) -> dict[str, float]:
    """The history's header and marks, in seconds of the wall clock."""
    out: dict[str, float] = {}
    for path in sorted((run / "history").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("type") == "header":
                out["header"] = event["time"] / 1e9
            elif event.get("type") == "mark":
                out[event["kind"]] = event["time"] / 1e9
    return out


def _split(run: Path, begun: float, ended: float, duration: float) -> dict[str, float]:
    """The run's phases in seconds, from its marks and the times its files were written."""
    m = _marks(run)
    folder = RunDir(run)
    summary = json.loads(folder.summary.read_text())
    analysed = folder.analysis.stat().st_mtime
    analysis_begun = analysed - summary["analysis_s"]
    reported = folder.report.stat().st_mtime
    return {
        "start": m["header"] - begun,
        "ready": m["workload-start"] - m["header"],
        "overrun": m["workload-done"] - m["workload-start"] - duration,
        "converge": m.get("quiesced", m["healed"]) - m["healed"],
        "final": m["end"] - m.get("quiesced", m["healed"]),
        "teardown": analysis_begun - m["end"],
        "analysis": summary["analysis_s"],
        "report": reported - analysed,
        "exit": ended - reported,
    }


def _newest(runs: Path, before: set[Path]) -> Path:
    """The run folder made since `before` (logs/run.json files) was taken."""
    made = [p.parents[1] for p in set(runs.glob(SUMMARIES)) - before]
    if not made or not RunDir(made[0]).report.exists():
        raise SystemExit(f"no judged run appeared in {runs}: see its runner.log")
    return made[0]


def _round(run: Path, begun: float, ended: float, duration: float, code: int) -> Round:
    analysis = read_analysis(RunDir(run).analysis)
    return Round(
        wall_s=ended - begun,
        duration_s=duration,
        verdict=shown_verdict(analysis.verdict, analysis.expectations),
        exit_code=code,
        phases=_split(run, begun, ended, duration),
        load=os.getloadavg()[0],
    )


class Runner:
    """Runs FILE on the stack in STACK_DIR: each run a `driftlab run` process of its own,
    or (`in_process`) a call in this one process, as `driftlab explore` runs its
    candidates (imports, probes and the warm server found once, before the rounds)."""

    def __init__(self, file: Path, stack_dir: Path, runs: Path, duration: str, in_process: bool):
        self.file, self.stack_dir, self.runs = file, stack_dir, runs
        self.duration, self.seconds = duration, parse_duration(duration) or 0.0
        self.in_process = in_process
        if in_process:
            from driftlab.harness.app.judge import warm_spark
            from driftlab.harness.lab.runner.stack_use import stack_at
            from driftlab.scenarios.pipeline.spec import load

            self.pipeline = load(file)
            self.stack = stack_at(stack_dir)
            self.server = warm_spark(self.stack, None)
            if self.server is None:
                raise SystemExit(f"the stack in {stack_dir} has no warm analysis server")
            self.run(seed=1000)  # the warm-up: imports, version probes, first report

    def run(self, seed: int) -> Round:
        """One run of the file, timed whole."""
        before = set(self.runs.glob(SUMMARIES))
        begun = time.time()
        if self.in_process:
            from driftlab.harness.app.pipeline import run_pipeline

            out = run_pipeline(
                self.pipeline,
                duration=self.seconds,
                seed=seed,
                runs_dir=self.runs,
                stack=self.stack,
                server=self.server,
            )
            code = out.run.exit_code
        else:
            code = self._process(seed)
        ended = time.time()
        return _round(_newest(self.runs, before), begun, ended, self.seconds, code)

    def _process(self, seed: int) -> int:
        done = subprocess.run(
            [
                str(DRIFTLAB),
                "run",
                str(self.file),
                "--duration",
                self.duration,
                "--stack-dir",
                str(self.stack_dir),
                "--runs-dir",
                str(self.runs),
                "--seed",
                str(seed),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if done.returncode not in (0, 1):
            raise SystemExit(
                f"driftlab run failed (exit {done.returncode}):\n{done.stderr[-2000:]}"
            )
        return done.returncode


def measure(runner: Runner, rounds: int, hogs: int) -> list[Round]:
    """`rounds` runs beside `hogs` CPU hogs, each line printed as it comes."""
    out = []
    with cpu_hogs(hogs):
        # A moment for the load average to feel the hogs before the first round.
        time.sleep(5 if hogs else 0)
        for i in range(rounds):
            r = runner.run(seed=i)
            print(f"  {hogs} hog(s), round {i + 1}: {r.line()}", flush=True)
            out.append(r)
    return out


def summary_line(hogs: int, rounds: list[Round], duration: str) -> str:
    """The median cost of `rounds` against the target, with the load they ran under."""
    costs = [r.cost_s for r in rounds]
    loads = [r.load for r in rounds]
    med = statistics.median(costs)
    phases = {k: statistics.median(r.phases[k] for r in rounds) for k in rounds[0].phases}
    split = ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
    verdicts = sorted({str(r.verdict) for r in rounds})
    return (
        f"{hogs} CPU hog(s): {med:.2f} s beyond a {duration} workload, median of {len(costs)} "
        f"({min(costs):.2f}-{max(costs):.2f} s; load average {min(loads):.1f}-{max(loads):.1f}); "
        f"target {TARGET_S:g} s: {'within' if med <= TARGET_S else 'OVER'}; median split: "
        f"{split}; verdicts {', '.join(verdicts)}"
    )


def cli(argv: list[str] | None = None) -> None:
    """Parse the arguments and measure."""
    parser = bench_parser(
        "python -m benchmarks.run_cost_bench", __doc__.split("\n\n")[0].replace("\n", " ")
    )
    parser.add_argument("files", nargs="*", type=Path, default=FILES, metavar="FILE")
    parser.add_argument("--stack-dir", type=Path, help="a running stack (default: its own)")
    parser.add_argument("--rounds", type=_positive, default=5, help="runs per load (default 5)")
    parser.add_argument("--duration", default="3s", help="the workload's (default: 3s)")
    parser.add_argument(
        "--hogs",
        type=comma_list(int),
        default=[0, 2],
        help="CPU hogs beside the rounds, one set of rounds per number (default: 0,2)",
    )
    parser.add_argument(
        "--process",
        action="store_true",
        help="each run a `driftlab run` process of its own (default: all in this process, "
        "as `driftlab explore` runs its candidates)",
    )
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    runs = Path(tempfile.mkdtemp(prefix="run-cost-", dir=args.dir))
    lines = []
    with running_stack(args.stack_dir, SERVICES) as stack_dir:
        for file in args.files:
            runner = Runner(file, stack_dir, runs, args.duration, not args.process)
            for hogs in args.hogs:
                rounds = measure(runner, args.rounds, hogs)
                lines.append(f"{file.name}, {summary_line(hogs, rounds, args.duration)}")
                print(lines[-1], flush=True)
    how = "a `driftlab run` process of its own" if args.process else "in one warm process"
    print(f"\n--duration {args.duration}, each run {how}:")
    for line in lines:
        print(f"  {line}")


if __name__ == "__main__":
    cli(sys.argv[1:])
