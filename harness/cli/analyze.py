"""`driftlab analyze RUN_DIR`: judge a recorded history with the PySpark checkers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from harness.cli import app

if TYPE_CHECKING:
    from checkers.analyze import AnalysisResult

EXIT_FORBIDDEN = 1
EXIT_BAD_INPUT = 2


@app.command()
def analyze(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="A run directory (runs/<scenario>/<time>-<seed>) or runs/latest.",
            show_default=False,
        ),
    ],
    spark_master: Annotated[
        str | None,
        typer.Option(
            "--spark-master",
            help=(
                "Spark master URL, e.g. spark://127.0.0.1:7077 for a standalone cluster. "
                "Default: $DRIFTLAB_SPARK_MASTER or local[*] (every core of this machine)."
            ),
            metavar="URL",
        ),
    ] = None,
) -> None:
    """Run every checker on a run's history and give the verdict.

    Converts RUN_DIR/history/*.jsonl to history.parquet, runs the PySpark
    checkers of docs/checkers.md (lost, duplicates, reorder, divergence,
    staleness, eventsourcing, graph) and writes analysis.json,
    anomalies.parquet, examples.json and series.json into RUN_DIR
    (formats: docs/analysis.md). The log goes to RUN_DIR/logs/analyze.log.

    The verdict compares the counts with the expectations in config.json.
    Exit status: 0 analysed, 1 a forbidden anomaly appeared, 2 bad input
    (no such run directory, corrupt history, unreadable config.json).

    Example: driftlab analyze runs/latest
    """
    # soft_wrap: messages stay whole lines (paths are long), the terminal wraps them.
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    # Spark loads only once the input is known to be worth it: bad paths fail fast.
    if not run_dir.is_dir():
        err.print(
            f"[red]error:[/] {run_dir}: no such run directory; pass one such as runs/latest "
            "or runs/<scenario>/<time>-<seed>"
        )
        raise typer.Exit(EXIT_BAD_INPUT)
    from checkers.analyze import AnalysisInputError
    from checkers.analyze import analyze as run_analysis
    from harness.history.errors import HistoryError

    console.print(f"[bold]analysing[/] {run_dir}")
    try:
        result = run_analysis(run_dir, spark_master, console=console)
    except (HistoryError, AnalysisInputError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    _summary(console, result)
    if result.forbidden_found:
        raise typer.Exit(EXIT_FORBIDDEN)


def _summary(console: Console, result: AnalysisResult) -> None:
    """The counts that matter, the expectations, the verdict."""
    a = result.analysis
    expectations = a["expectations"]
    table = Table(title="anomalies", title_justify="left", show_edge=False)
    table.add_column("kind")
    table.add_column("count", justify="right")
    table.add_column("expected")
    for kind, n in a["counts"].items():
        want = expectations.get(kind, "")
        if n == 0 and not want:
            continue
        bad = (want == "absent" and n) or (want == "present" and not n)
        style = "red" if bad else ("green" if want else "")
        table.add_row(kind, f"{n:,}", want, style=style)
    if table.row_count:
        console.print(table)
    else:
        console.print("no anomalies")
    h = a["history"]
    if h["cut_short"]:
        console.print(
            "[yellow]history cut short:[/] no end mark, the run was killed before closing "
            "its history; anomalies near its end may be artefacts of the cut"
        )
    if h["dropped_partial_lines"]:
        console.print(f"[yellow]dropped {h['dropped_partial_lines']} partial line(s)[/]")
    if result.incomplete_checkers:
        console.print(
            "[yellow]incomplete:[/] checkers "
            + ", ".join(result.incomplete_checkers)
            + " did not run (their kinds count zero); see analysis.json"
        )
    colour = {
        "reproduced": "green",
        "not reproduced": "yellow",
        "unexpected anomaly": "red",
    }.get(result.verdict, "white")
    extra = ""
    if result.forbidden_found:
        extra = f" (forbidden: {', '.join(result.forbidden_found)})"
    elif a["expected_missing"]:
        extra = f" (expected but absent: {', '.join(a['expected_missing'])})"
    console.print(f"verdict: [bold {colour}]{result.verdict}[/]{extra}")
    console.print(
        f"[dim]{h['events']:,} events in {a['timings']['total_s']:.1f}s; "
        f"outputs in {result.run_dir}[/]"
    )
