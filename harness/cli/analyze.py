"""`driftlab analyze RUN_DIR`: judge a recorded history with the PySpark checkers."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from driftlab.harness.cli.app import app
from driftlab.harness.cli.common import (
    SPARK_MASTER_OPTION,
    STACK_DIR_OPTION,
    attach_stack,
    check_spark_master,
    fail,
    runs_dir_option,
)
from driftlab.harness.cli.printing import lost_where_lines, print_caveats, progress
from driftlab.harness.history import exitcodes
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.services.stack_home import default_stack_dir

if TYPE_CHECKING:
    from driftlab.checkers.analyze import AnalysisResult
    from driftlab.harness.lab.services.base import Endpoint
    from driftlab.harness.lab.services.stack_protocol import ServiceStack


@app.command()
def analyze(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help=(
                "A run directory (runs/<scenario>/<time>-<seed>) or runs/latest; with "
                "--from, the history file to import (history.edn or history.json)."
            ),
            show_default=False,
        ),
    ],
    from_: Annotated[
        str | None,
        typer.Option(
            "--from",
            help=(
                "Import a history another tool recorded before analysing it: 'jepsen' "
                "for a Jepsen or Maelstrom kafka-workload history (docs/jepsen.md). It "
                "becomes a new run folder runs/jepsen/<time>-0, whose report is written too."
            ),
            metavar="TOOL",
        ),
    ] = None,
    runs_dir: Annotated[
        Path, runs_dir_option("With --from: where the new run folder goes.")
    ] = Path("runs"),
    spark_master: Annotated[str | None, SPARK_MASTER_OPTION] = None,
    stack_dir: Annotated[Path | None, STACK_DIR_OPTION] = None,
) -> None:
    """Run every checker on a run's history and give the verdict.

    Converts RUN_DIR/history/*.jsonl to history.parquet, runs the PySpark
    checkers of docs/checkers.md (lost, duplicates, reorder, divergence,
    staleness, eventsourcing, graph) and writes analysis.json,
    anomalies.parquet, examples.json and series.json into RUN_DIR
    (formats: docs/analysis.md). The log goes to RUN_DIR/logs/analyze.log.

    The verdict compares the counts with the expectations in config.json, each
    kind found N times in M chances (docs/checkers.md): a run is inconclusive, with
    what was missing, when a kind its expectations name had no chance, its workload
    never ran, or a fault window never took effect or had no operation; it is "lab
    failed" when the lab recorded a failure of its own. A forbidden kind found fails
    whatever else is missing. Ctrl-C stops
    the analysis at once; the history is left as it was. With the stack of a plain
    `driftlab up` running (or that of --stack-dir), its warm Spark (the `analysis`
    service) does the work, unless --spark-master or $DRIFTLAB_SPARK_MASTER names
    another master; the first line says where the analysis runs.

    Exit status: 0 analysed; 1 a forbidden anomaly appeared; 2 bad input (no such
    run directory, corrupt history, unreadable config.json, malformed --spark-master);
    3 the lab failed (Spark master unreachable, Spark failed, disk full, read-only run
    folder) or the run is inconclusive; 130 interrupted.

    Example: driftlab analyze runs/latest
             driftlab analyze --from jepsen store/latest/history.edn
    """
    # soft_wrap: messages stay whole lines (paths are long), the terminal wraps them.
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if from_ is not None:
        run_dir = _import(from_, run_dir, runs_dir, console, err)
    # Spark loads only once the input is known to be worth it: bad paths fail fast.
    if not run_dir.is_dir():
        raise fail(
            err,
            exitcodes.BAD_INPUT,
            f"{run_dir}: no such run directory; pass one such as runs/latest "
            "or runs/<scenario>/<time>-<seed>",
        )
    if not RunDir(run_dir).config.is_file():
        # Found only after the whole analysis, it was a lab failure (exit 3).
        raise fail(
            err,
            exitcodes.BAD_INPUT,
            f"{run_dir} has no config.json, so it is no run folder (or its run was killed "
            "before it began); pass one such as runs/latest or runs/<scenario>/<time>-<seed>",
        )
    check_spark_master(spark_master, err)
    stack, server = _judge_where(spark_master, stack_dir, RunDir(run_dir).analyze_log, err)
    from driftlab.harness.app.judge import analysis_failure, analyze_recorded

    where = " [dim](in this process)[/]"
    if server is not None:
        root = stack.root if stack is not None else default_stack_dir()
        where = f" [dim](on the warm Spark of the stack in {escape(str(root))})[/]"
    console.print(f"[bold]analysing[/] {run_dir}{where}")
    try:
        with _shown(console, remote=server is not None):
            out = analyze_recorded(
                RunDir(run_dir),
                spark_master=spark_master,
                server=server,
                console=console,
                report=from_ is not None,
            )
    except KeyboardInterrupt:
        console.quiet = True  # the checkers' threads report their cancelled jobs meanwhile
        raise fail(
            err, exitcodes.INTERRUPTED, f"interrupted; the history in {run_dir} is intact"
        ) from None
    except Exception as exc:
        code, message = analysis_failure(exc, RunDir(run_dir))
        raise fail(err, code, message) from None
    _summary(console, out.result)
    if out.report is not None:
        console.print(f"report: {out.report}")
    if out.report_error is not None:
        err.print(f"[yellow]no report:[/] {out.report_error}")
    _reasons(console, out.result)
    if out.exit_code != exitcodes.OK:
        raise typer.Exit(out.exit_code)


def _judge_where(
    spark_master: str | None, stack_dir: Path | None, spark_log: Path, err: Console
) -> tuple[ServiceStack | None, Endpoint | None]:
    """The stack asked for, and its warm analysis server if that judges; else no server,
    and this process's Spark starts now, its JVM's log in `spark_log`: the JVM and its
    Python workers start while the rest of the analysis loads and reads the history,
    which a cold small run waited for in turn."""
    from driftlab.harness.app.judge import warm_analysis_server

    stack = attach_stack(stack_dir, err) if stack_dir is not None else None
    server = None if spark_master else warm_analysis_server(stack)
    if server is None:
        from driftlab.checkers.spark_start import warm_up

        warm_up(spark_master, spark_log)
    return stack, server


def _reasons(console: Console, result: AnalysisResult) -> None:
    """Why the run is inconclusive, the lab failed or the system under test failed
    outside the counts, one line each."""
    from driftlab.checkers.verdict import INCONCLUSIVE, LAB_FAILED

    reasons = result.reasons
    if reasons:
        what = {
            INCONCLUSIVE: "the run did not test its claim",
            LAB_FAILED: "the lab failed, not the system under test",
        }.get(result.verdict, "the system under test failed")
        console.print(f"[yellow]{result.verdict}[/], {what}:")
    for line in reasons:
        console.print(f"  - {line}")
    print_caveats(console, result.analysis.caveats)


@contextlib.contextmanager
def _shown(console: Console, *, remote: bool) -> Iterator[None]:
    """A transient line while the analysis works: the time so far and, when Spark runs
    in this process, the tasks of its running job done (a large history's pass takes
    minutes; a run's, a second)."""
    from driftlab.checkers.session import task_progress

    with progress(console) as prog:
        task = prog.add_task("analysing", total=None)
        stop = threading.Event()

        def follow() -> None:
            while not stop.wait(0.5):
                tasks = None if remote else task_progress()
                shown = f": Spark tasks {tasks[0]}/{tasks[1]}" if tasks else ""
                prog.update(task, description=f"analysing{shown}")

        follower = threading.Thread(target=follow, name="analysis-progress", daemon=True)
        follower.start()
        try:
            yield
        finally:
            stop.set()
            follower.join()


def _import(tool: str, source: Path, runs: Path, console: Console, err: Console) -> Path:
    """Import `source` into a new run folder under `runs` and return that folder."""
    from driftlab.harness.app.foreign import check_foreign, import_foreign

    try:
        check_foreign(tool, source)
        bar = Progress(
            TextColumn("importing"),
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        size = source.stat().st_size
        with bar:
            run_dir, summary = import_foreign(
                tool, source, runs, wrap=lambda raw: bar.wrap_file(raw, total=size)
            )
    except exitcodes.BadInput as exc:
        raise fail(err, exitcodes.BAD_INPUT, str(exc)) from None
    console.print(
        f"imported {summary.ops:,} Jepsen ops ({summary.keys:,} keys, {summary.sends:,} "
        f"sends acknowledged, {summary.polled:,} messages polled) as {summary.events:,} "
        f"events (read in {summary.seconds:.1f} s)"
    )
    for line in summary.warnings:
        err.print(f"[yellow]warning:[/] {line}")
    return run_dir.path


def _summary(console: Console, result: AnalysisResult) -> None:
    """The counts that matter, the expectations, the verdict."""
    a = result.analysis
    expectations = a.expectations
    table = Table(title="anomalies", title_justify="left", show_edge=False)
    table.add_column("kind")
    table.add_column("found", justify="right")
    table.add_column("in chances", justify="right")
    table.add_column("expected")
    coverage = a.coverage
    for kind, n in a.counts.items():
        want = expectations.get(kind, "")
        if n == 0 and not want:
            continue
        bad = (want == "absent" and n) or (want == "present" and not n)
        untested = want and not coverage.get(kind)
        style = "yellow" if untested else "red" if bad else ("green" if want else "")
        chances = f"{coverage[kind]:,}" if kind in coverage else "?"
        table.add_row(kind, f"{n:,}", chances, want, style=style)
    if table.row_count:
        console.print(table)
    else:
        console.print("no anomalies")
    for line in lost_where_lines(a.lost_where):
        console.print(line)
    h = a.history
    if h.cut_short:
        console.print(
            "[yellow]history cut short:[/] no end mark, the run was killed before closing "
            "its history; anomalies near its end may be artefacts of the cut"
        )
    if h.dropped_partial_lines:
        console.print(f"[yellow]dropped {h.dropped_partial_lines} partial line(s)[/]")
    if result.incomplete_checkers:
        console.print(
            "[yellow]incomplete:[/] checkers "
            + ", ".join(result.incomplete_checkers)
            + " did not run (their kinds count zero); see analysis.json"
        )
    from driftlab.checkers.verdict import shown_verdict

    word = shown_verdict(result.verdict, expectations)
    colour = {
        "reproduced": "green",
        "held": "green",
        "not reproduced": "yellow",
        "unexpected anomaly": "red",
    }.get(word, "white")
    extra = ""
    # An inconclusive verdict is followed by what was missing, line by line.
    judged = result.verdict in ("unexpected anomaly", "not reproduced")
    if result.forbidden_found and judged:
        extra = f" (forbidden: {', '.join(result.forbidden_found)})"
    elif a.expected_missing and judged:
        extra = f" (expected but absent: {', '.join(a.expected_missing)})"
    console.print(f"verdict: [bold {colour}]{word}[/]{extra}")
    span_s = (h.t1_ns - h.t0_ns) / 1e9
    console.print(
        f"[dim]{h.events:,} events over {span_s:.1f} s of history, analysed in "
        f"{a.timings.total_s:.1f} s; outputs in {result.run_dir}[/]"
    )
