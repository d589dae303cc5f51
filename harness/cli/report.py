"""`driftlab report RUN_DIR` and `driftlab report --suite runs/`: re-render the HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from driftlab.harness.cli.app import app
from driftlab.harness.history import exitcodes


@app.command()
def report(
    path: Annotated[
        Path,
        typer.Argument(
            help="A run directory (runs/<scenario>/<time>-<seed>, runs/latest), or with "
            "--suite the runs/ folder.",
            show_default=False,
        ),
    ],
    suite: Annotated[
        bool,
        typer.Option("--suite", help="Render the suite page PATH/index.html instead."),
    ] = False,
) -> None:
    """Re-render the HTML report of a run from its analysis outputs, or the suite page.

    A run report (RUN_DIR/report.html) needs RUN_DIR/analysis.json, written by
    `driftlab analyze`; it reads examples.json, series.json, config.json and the few
    events of the keys it draws from history.parquet. The suite page (runs/index.html)
    shows every run folder under runs/, claim by claim, with the trend of each verdict.
    Both are single files that work offline.

    Exit status: 0 written, 2 bad input (no such folder, no analysis).

    Examples: driftlab report runs/latest · driftlab report --suite runs/
    """
    from driftlab.reports.render import ReportError
    from driftlab.reports.run_report import render_run_report
    from driftlab.reports.suite_page import render_suite

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        written = render_suite(path) if suite else render_run_report(path)
    except ReportError as exc:
        err.print(f"[red]error:[/] {exc}")
        raise typer.Exit(exitcodes.BAD_INPUT) from None
    size = written.stat().st_size
    Console(highlight=False, soft_wrap=True).print(f"{written} ({size / 1024:.0f} kB)")
