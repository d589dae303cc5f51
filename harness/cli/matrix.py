"""`driftlab matrix`: scenarios x fault schedules x seeds within a time budget."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from driftlab.harness.cli.app import app
from driftlab.harness.cli.common import (
    BACKEND_OPTION,
    SPARK_MASTER_OPTION,
    STACK_DIR_OPTION,
    check_runs_dir,
    check_spark_master,
    enter_backend,
    parse_duration,
    runs_dir_option,
    use_stack,
)
from driftlab.harness.cli.printing import verdict_word
from driftlab.harness.history import exitcodes


@app.command()
def matrix(
    budget: Annotated[
        str,
        typer.Option(
            help="Wall-time budget, e.g. 20m: cells that would overrun it are skipped, "
            "a cell still running at the deadline is cut."
        ),
    ] = "20m",
    scenarios: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated claim ids, scenario names or pipeline files (a path "
            "ending in .toml) (default: every claim)."
        ),
    ] = None,
    schedules: Annotated[
        str, typer.Option(help="Comma-separated fault schedules: own, none, latency.")
    ] = "own,none,latency",
    seeds: Annotated[
        str,
        typer.Option(
            help="Seeds: a count N runs seeds 0..N-1 (3 = seeds 0,1,2; 1 = seed 0), a list "
            "(1,5,9; one seed: 7,) or a range (0-4)."
        ),
    ] = "3",
    duration: Annotated[
        str | None,
        typer.Option(help="Workload duration of every run, e.g. 10s (default: each one's)."),
    ] = None,
    runs_dir: Annotated[
        Path, runs_dir_option("Where run folders, index.html and matrix.json go.")
    ] = Path("runs"),
    junit: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Write a JUnit XML report: one testcase per run."),
    ] = None,
    spark_master: Annotated[str | None, SPARK_MASTER_OPTION] = None,
    backend: Annotated[str, BACKEND_OPTION] = "local",
    stack_dir: Annotated[Path | None, STACK_DIR_OPTION] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the cells that would run; run none.")
    ] = False,
) -> None:
    """Run scenarios x fault schedules x seeds on one stack within a time budget.

    The stack is that of `driftlab up` (or of `driftlab up --dir DIR` with --stack-dir)
    when it is running, else one of the matrix's own; a line says which.

    Writes a run folder per cell, the suite page runs/index.html listing every run,
    runs/matrix.json (cells run and skipped) and, with --junit, a JUnit XML report.
    Exit status: 0 when no run found a forbidden anomaly (predicted anomalies are the
    demonstrations, found or not); 1 when some run did; 2 bad input; 3 a run that could
    not complete or was inconclusive (the lab failed, not the system under test);
    130 interrupted.

    Example: driftlab matrix --budget 20m --scenarios C1,C3 --seeds 2 --junit matrix.xml
    """
    from driftlab.harness.app.matrix import parse_seeds, plan
    from driftlab.harness.cli.pipeline import pipeline_scenario
    from driftlab.harness.lab.runner.stack_use import check_backend
    from driftlab.scenarios.catalogue.registry import claims_scenarios, get_scenario

    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    try:
        check_backend(backend)
        budget_s = parse_duration(budget) or 0.0
        secs = parse_duration(duration)
        names = [s.strip() for s in (scenarios or "").split(",") if s.strip()]
        files = [n for n in names if n.endswith(".toml")]
        named = [n for n in names if not n.endswith(".toml")]
        chosen = [get_scenario(n) for n in named] if names else claims_scenarios()
        chosen = [sc.with_overrides(duration=secs) for sc in chosen]
        chosen += [pipeline_scenario(Path(f), secs, backend) for f in files]
        cells = plan(
            chosen, [s.strip() for s in schedules.split(",") if s.strip()], parse_seeds(seeds)
        )
    except (KeyError, ValueError, typer.BadParameter) as exc:
        err.print(f"[red]error:[/] {escape(str(exc.args[0] if exc.args else exc))}")
        raise typer.Exit(exitcodes.BAD_INPUT) from None
    if not cells:
        err.print("[red]error:[/] no cell to run: check --scenarios and --schedules")
        raise typer.Exit(exitcodes.BAD_INPUT)
    if dry_run:
        for c in cells:
            console.print(f"{c.scenario.name} seed {c.seed} ({c.scenario.workload.duration:g} s)")
        seeds_run = ", ".join(map(str, sorted({c.seed for c in cells})))
        console.print(f"{len(cells)} cells, seeds {seeds_run}, budget {budget_s:.0f} s")
        return
    check_runs_dir(runs_dir, err)
    check_spark_master(spark_master, err)
    raise typer.Exit(
        _run(console, err, cells, budget_s, runs_dir, junit, spark_master, backend, stack_dir)
    )


def _run(
    console: Console,
    err: Console,
    cells: list[Any],
    budget_s: float,
    runs_dir: Path,
    junit: Path | None,
    spark_master: str | None,
    backend: str,
    stack_dir: Path | None,
) -> int:
    from driftlab.harness.app.judge import warm_spark
    from driftlab.harness.app.matrix import run_matrix
    from driftlab.harness.app.suite_index import write_matrix_outputs
    from driftlab.harness.lab.runner.stack_use import stack_line, stack_used

    def show(cell: Any, outcome: Any) -> None:
        r = outcome.result
        what = verdict_word(r) or r.error or "not judged"
        colour = "red" if r.verdict == "unexpected anomaly" or r.error else "green"
        console.print(
            f"{cell.scenario.name} seed {cell.seed}: [{colour}]{escape(what)}[/] ({r.wall_s:.0f} s)"
        )

    chosen_seeds = sorted({c.seed for c in cells})
    console.print(
        f"matrix: {len(cells)} cells, seeds {', '.join(map(str, chosen_seeds))}, "
        f"budget {budget_s:.0f} s"
    )
    with contextlib.ExitStack() as scope:
        stack = use_stack(scope, stack_dir, backend, err)
        if stack is None:
            stack = enter_backend(scope, backend, err)
        console.print(stack_line(stack_used(stack)), soft_wrap=True)
        result = run_matrix(
            cells,
            budget_s,
            runs_dir,
            stack,
            spark_master,
            on_result=show,
            server=warm_spark(stack, spark_master),
        )
    index = write_matrix_outputs(runs_dir, result, junit)
    if junit is not None:
        console.print(f"JUnit: {junit}")
    for outcome in result.forbidden:
        console.print(f"[red]{escape(outcome.summary())}[/]")
    for cell, outcome in result.cut:
        console.print(
            f"{cell.scenario.name} seed {cell.seed}: [yellow]cut at the deadline[/] "
            f"({outcome.result.run_dir})"
        )
    console.print(
        f"{len(result.outcomes)} runs in {result.wall_s:.0f} s, {len(result.cut)} cut and "
        f"{len(result.skipped)} skipped for the budget; "
        f"{len(result.forbidden)} with forbidden anomalies, "
        f"{len(result.errors)} failed runs; index: {index}"
    )
    return result.exit_code
