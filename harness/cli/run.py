"""`driftlab run SCENARIO`: one scenario on the local stack, recorded and judged."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from harness import exitcodes
from harness.cli import app

if TYPE_CHECKING:
    from harness.runner.runner import RunResult
    from harness.services.stack_protocol import ServiceStack

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")


def parse_duration(text: str | None) -> float | None:
    """Seconds from `90`, `90s`, `1.5m` or `500ms`; a clear error otherwise."""
    if text is None:
        return None
    m = _DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        raise typer.BadParameter(f"{text!r} is not a duration; write e.g. 10s, 1.5m or 500ms")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(2) or "s"]
    return float(m.group(1)) * scale


def progress(console: Console | None = None) -> Progress:
    """The terminal progress line shared by `run`, `suite` and `analyze`."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def make_tick(
    prog: Progress, task: TaskID, label: str, duration: float
) -> Callable[[str, float, object], None]:
    """A runner tick that shows the phase, the elapsed workload time and the op count."""

    def tick(phase: str, elapsed: float, stats: object) -> None:
        if phase == "workload":
            ops = getattr(stats, "ops", 0)
            text = f"{label}: workload {elapsed:4.1f}/{duration:.0f} s, {ops:,} ops"
        else:
            text = {
                "stack": f"{label}: starting services",
                "quiesce": f"{label}: healed; waiting for the pipelines to drain",
                "analyze": f"{label}: analysing the history (Spark)",
            }.get(phase, f"{label}: {phase}")
        prog.update(task, description=text)

    return tick


BACKEND_OPTION = typer.Option(
    "--backend",
    help="Stack backend: local (supervised processes, default) or docker (the same services "
    "in containers of driftlab's images; build them with scripts/docker-images).",
)


def fail(err: Console, code: int, message: str) -> typer.Exit:
    """Print `error: message` (one line: the problem and its fix) and return the Exit
    to raise with `code` (harness.exitcodes)."""
    err.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


def check_spark_master(master: str | None, err: Console) -> None:
    """Before any scenario starts: exit 2 for a malformed --spark-master, 3 when the
    master does not answer (a run used to do all its work before finding out)."""
    from checkers.session import MasterUnreachable, check_master

    try:
        check_master(master)
    except ValueError as exc:
        raise fail(err, exitcodes.BAD_INPUT, f"--spark-master: {exc}") from None
    except MasterUnreachable as exc:
        raise fail(err, exitcodes.LAB_FAILED, str(exc)) from None


def enter_backend(scope: contextlib.ExitStack, backend: str, err: Console) -> ServiceStack:
    """An owned stack of `backend` for the command's runs, stopped when `scope` ends;
    exit 2 for an unknown backend, 3 when it cannot be had (no Docker engine)."""
    from harness.runner.stack_use import open_stack
    from harness.services.base import ServiceError

    try:
        return scope.enter_context(open_stack(backend))
    except ValueError as exc:
        raise fail(err, exitcodes.BAD_INPUT, str(exc)) from None
    except ServiceError as exc:
        raise fail(err, exitcodes.LAB_FAILED, str(exc)) from None


def attach_stack(stack_dir: Path, err: Console) -> Any:
    """The running stack of `driftlab up --dir stack_dir`; exit 2 when there is none,
    3 when it is not running."""
    from harness.runner.stack_use import stack_at

    try:
        return stack_at(stack_dir)
    except exitcodes.BadInput as exc:
        raise fail(err, exitcodes.BAD_INPUT, str(exc)) from None
    except exitcodes.LabFailure as exc:
        raise fail(err, exitcodes.LAB_FAILED, str(exc)) from None


STACK_DIR_OPTION = typer.Option(
    "--stack-dir",
    metavar="DIR",
    help="Use the running stack of `driftlab up --dir DIR` (default: that of a plain "
    "`driftlab up` if it runs, else a stack of the command's own).",
)


@app.command()
def run(
    scenario: Annotated[
        str,
        typer.Argument(
            help="A scenario name or claim id (see `driftlab suite --list`).",
            show_default=False,
        ),
    ],
    seed: Annotated[int, typer.Option(help="Seed of every random choice of the run.")] = 0,
    duration: Annotated[
        str | None,
        typer.Option(help="Workload duration, e.g. 10s or 1m (faults stretch with it)."),
    ] = None,
    clients: Annotated[
        int | None, typer.Option(min=1, help="Concurrent clients (default: the scenario's).")
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(min=0, help="Target ops/s of all clients together (0: unlimited)."),
    ] = None,
    runs_dir: Annotated[
        Path, typer.Option("--runs-dir", resolve_path=True, help="Where run folders are created.")
    ] = Path("runs"),
    spark_master: Annotated[
        str | None,
        typer.Option(
            "--spark-master",
            metavar="URL",
            help="Spark master URL for the analysis (default local[*]).",
        ),
    ] = None,
    analyze: Annotated[
        bool, typer.Option("--analyze/--no-analyze", help="Judge the history after the run.")
    ] = True,
    backend: Annotated[str, BACKEND_OPTION] = "local",
    stack_dir: Annotated[Path | None, STACK_DIR_OPTION] = None,
) -> None:
    """Run one scenario: workload and faults on the real stack, then the verdict.

    Uses the stack of `driftlab up` (or of `driftlab up --dir DIR` with --stack-dir)
    when it is running, else starts one for this run and stops it afterwards. Before
    the workload every link is healed and checked free of toxics, and what killed runs
    left (connectors, replication slots) is removed. Writes
    runs/<scenario>/<UTC time>-<seed>/ (config.json, history/, logs/, analysis files)
    and points runs/latest at it.

    Exit status: 0 reproduced (or no expectations); 1 not reproduced or an unexpected
    anomaly (the verdict only); 2 bad input; 3 the lab failed (a service down, a port
    taken, the Spark master unreachable, disk full, read-only runs folder) or the run
    is inconclusive (no operation ran, nothing was delivered, applied or read
    downstream, a scheduled fault never took effect); 130 interrupted.

    Example: driftlab run C1 --seed 7 --duration 20s
    """
    from checkers.spark_start import warm_up
    from harness.app.run import check_scenario, run_scenario
    from harness.rundir import RunsDir
    from scenarios.registry import get_scenario

    err = Console(stderr=True, highlight=False)
    console = Console(highlight=False)
    try:
        sc = get_scenario(scenario).with_overrides(
            duration=parse_duration(duration), clients=clients, rate=rate
        )
        check_scenario(sc)
    except (KeyError, ValueError) as exc:
        raise fail(err, exitcodes.BAD_INPUT, str(exc.args[0] if exc.args else exc)) from None
    if analyze:
        check_spark_master(spark_master, err)
    with contextlib.ExitStack() as scope:
        stack = None
        if stack_dir is not None:
            stack = attach_stack(stack_dir, err)
        elif backend != "local":
            stack = enter_backend(scope, backend, err)
        prog = scope.enter_context(progress())
        task = prog.add_task(sc.name, total=None)
        if analyze:
            warm_up(spark_master, RunsDir(runs_dir).spark_log)
        result = run_scenario(
            sc,
            seed=seed,
            runs_dir=runs_dir,
            spark_master=spark_master,
            stack=stack,
            analyze=analyze,
            tick=make_tick(prog, task, sc.name, sc.workload.duration),
        )
    print_result(console, result)
    raise typer.Exit(result.exit_code)


def lost_where_lines(lost_where: dict[str, dict[str, int]]) -> list[str]:
    """One line per lost kind whose rows say where the loss went (analysis.json's
    `lost_where`): still in the broker's log, or not."""
    out = []
    for kind, where in lost_where.items():
        if where.get("in the log") or where.get("not in the log"):
            unknown = f", {where['unknown']:,} not known" if where.get("unknown") else ""
            out.append(
                f"{kind}: {where['in the log']:,} still in the broker's log (the consumer "
                f"skipped them), {where['not in the log']:,} not in it (the broker lost "
                f"them, or retention or compaction removed them){unknown}"
            )
    return out


def print_result(console: Console, r: RunResult) -> None:
    """The short summary of one run: where, how much, what verdict."""
    s = r.stats
    console.print(
        f"[bold]{r.scenario}[/] seed {r.seed}: {s.ops:,} ops in {s.elapsed:.1f} s "
        f"({s.rate:.0f} ops/s), {r.fault_windows} fault window(s), "
        f"{s.crashes} app crash(es); wall {r.wall_s:.1f} s"
    )
    console.print(f"  run folder: {r.run_dir}")
    for e in r.fault_errors:
        console.print(f"  [yellow]fault problem:[/] {e}")
    if r.inconclusive:
        console.print("  [yellow]inconclusive[/], the run did not test its claim; missing:")
        for why in r.inconclusive:
            console.print(f"    - {why}")
    elif r.error:
        console.print(f"  [red]error:[/] {r.error} (see {r.run_dir}/logs/runner.log)")
    if r.analysis_interrupted:
        console.print(
            "  [yellow]interrupted[/] during the analysis; the history is complete: "
            f"`driftlab analyze {r.run_dir}` judges it"
        )
    elif r.interrupted:
        console.print(
            "  [yellow]interrupted:[/] faults healed, history closed without its end mark; "
            f"`driftlab analyze {r.run_dir}` still reads it"
        )
    if r.verdict is not None:
        colour = {"reproduced": "green", "unexpected anomaly": "red"}.get(r.verdict, "yellow")
        counts = ", ".join(f"{k} {v}" for k, v in sorted(r.counts.items())) or "no anomalies"
        console.print(f"  anomalies: {counts}")
        for line in lost_where_lines(r.lost_where):
            console.print(f"  {line}")
        console.print(f"  verdict: [{colour}]{r.verdict}[/]")
