"""`driftlab replay SCHEDULE.json`: run an explored schedule on the real stack."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from driftlab.harness.app.judge import analysis_failure
from driftlab.harness.app.replay import judge_replay, replay, replayable
from driftlab.harness.cli.app import app
from driftlab.harness.cli.common import (
    RUNS_DIR_OPTION,
    SPARK_MASTER_OPTION,
    check_spark_master,
    seed_in_range,
)
from driftlab.harness.history import exitcodes
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.explore.schedule import Schedule, ScheduleError, describe
from driftlab.harness.lab.replay.turnstile import ReplayError
from driftlab.harness.lab.services.base import ServiceError

_HELP = (
    "Replay a schedule saved by `driftlab explore` on the real services.\n\n"
    "Each client is held at the setup's step points (between the database write and the "
    "cache write, ...) and let through one scheduled step at a time, so the interleaving "
    "is forced. The replay writes a normal run directory (config.json names the "
    "schedule), analyses it with the Spark checkers and compares the anomaly kinds with "
    "those the simulator saved in the schedule. Exit 0 when they are the same, 1 when "
    "they differ (both lists are printed), 2 on bad input, 3 when the lab failed (a "
    "service down, a step that could not be forced, the Spark master unreachable)."
)


@app.command(name="replay", help=_HELP, epilog="The schedule file format is in docs/explore.md.")
def replay_cmd(
    schedule_path: Annotated[
        Path, typer.Argument(metavar="SCHEDULE", help="A schedule file of `driftlab explore`.")
    ],
    runs_dir: Annotated[Path, RUNS_DIR_OPTION] = Path("runs"),
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="Run seed (default: the schedule's own, else a random one).",
            callback=seed_in_range,
        ),
    ] = None,
    spark_master: Annotated[str | None, SPARK_MASTER_OPTION] = None,
) -> None:
    """Replay SCHEDULE on the real stack and compare its anomalies with the simulation's."""
    console = Console()
    try:
        schedule = Schedule.load(schedule_path)
        replayable(schedule)
    except (ScheduleError, ReplayError) as exc:
        console.print(f"[red]{schedule_path}: {exc}[/]")
        raise typer.Exit(exitcodes.BAD_INPUT) from None
    check_spark_master(spark_master, Console(stderr=True, highlight=False))
    if seed is not None:
        told = f"seed {seed}"
    elif schedule.seed is not None:
        seed, told = schedule.seed, f"seed {schedule.seed}, the schedule's"
    else:
        seed = secrets.randbelow(2**31)
        told = f"seed {seed}, a random one: the schedule names none"
    console.print(f"[bold]replay[/] {schedule_path} ({schedule.setup}, {told})")
    for i, step in enumerate(schedule.steps, start=1):
        console.print(f"  {i:>2}. {describe(step)}")
    try:
        run_dir = replay(schedule, runs_dir=runs_dir, seed=seed, source=schedule_path.resolve())
    except (ReplayError, ServiceError) as exc:
        console.print(f"[red]replay failed[/]: {exc}")
        raise typer.Exit(exitcodes.LAB_FAILED) from None
    console.print(f"run folder: {run_dir}")
    try:
        replayed = judge_replay(schedule, run_dir, spark_master=spark_master, console=console)
    except Exception as exc:
        code, message = analysis_failure(exc, RunDir(run_dir))
        console.print(f"[red]analysis failed[/]: {escape(message)}")
        raise typer.Exit(code) from None
    if replayed.analysed.report_error:
        # The verdict stands without its page; `driftlab report RUN_DIR` renders it again.
        console.print(
            f"[yellow]report.html not rendered[/]: {escape(replayed.analysed.report_error)} "
            "(retry: driftlab report)"
        )
    result = replayed.analysed.result
    console.print(f"verdict: [bold]{result.verdict}[/]")
    for line in result.reasons:
        console.print(f"  - {escape(line)}")
    comparison = replayed.comparison
    if comparison is not None:
        console.print(f"simulated kinds: {', '.join(sorted(comparison.expected)) or 'none'}")
        console.print(f"real kinds:      {', '.join(sorted(comparison.found)) or 'none'}")
        if comparison.same:
            console.print("[green]the real stack shows the simulated anomaly kinds[/]")
        if comparison.missing:
            console.print(f"[red]not seen on the real stack[/]: {', '.join(comparison.missing)}")
        if comparison.extra:
            console.print(f"[red]seen only on the real stack[/]: {', '.join(comparison.extra)}")
    if replayed.exit_code != exitcodes.OK:
        raise typer.Exit(replayed.exit_code)
