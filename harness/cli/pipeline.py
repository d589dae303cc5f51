"""`driftlab run pipeline.toml` and `driftlab init`: your own pipeline, from a file."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from harness import exitcodes
from harness.cli.app import app
from harness.cli.common import attach_stack, check_spark_master, fail, parse_duration
from harness.cli.printing import make_tick, print_result, progress
from harness.pipeline.shapes import SHAPES, starting_file


def is_pipeline_file(argument: str) -> bool:
    """Whether `driftlab run`'s argument names a pipeline file rather than a scenario."""
    return argument.endswith(".toml")


def refuse_scenario_options(*, clients: int | None, rate: float | None, backend: str) -> None:
    """Exit 2 for the options of `driftlab run` that a pipeline file does not take."""
    err = Console(stderr=True, highlight=False)
    if clients is not None or rate is not None:
        raise fail(
            err,
            exitcodes.BAD_INPUT,
            "--clients and --rate do not apply to a pipeline file; set clients and rate "
            "in its [workload]",
        )
    if backend != "local":
        raise fail(
            err,
            exitcodes.BAD_INPUT,
            f"--backend {backend}: a pipeline file runs on the local stack only; drop --backend",
        )


def run_pipeline_file(
    path: Path,
    *,
    seed: int,
    duration: str | None,
    runs_dir: Path,
    spark_master: str | None,
    analyze: bool,
    stack_dir: Path | None,
) -> None:
    """Run a pipeline file once and exit with its verdict's status (as `driftlab run`)."""
    from checkers.spark_start import warm_up
    from harness.app.pipeline import run_pipeline
    from harness.pipeline.spec import PipelineError, load
    from harness.rundir import RunsDir

    err = Console(stderr=True, highlight=False)
    console = Console(highlight=False)
    try:
        pipeline = load(path)
        seconds = parse_duration(duration)
    except (PipelineError, typer.BadParameter) as exc:
        raise fail(err, exitcodes.BAD_INPUT, str(exc)) from None
    if analyze:
        check_spark_master(spark_master, err)
    with contextlib.ExitStack() as scope:
        stack = attach_stack(stack_dir, err) if stack_dir is not None else None
        prog = scope.enter_context(progress())
        task = prog.add_task(pipeline.name, total=None)
        if analyze:
            warm_up(spark_master, RunsDir(runs_dir).spark_log)
        out = run_pipeline(
            pipeline,
            seed=seed,
            runs_dir=runs_dir,
            stack=stack,
            spark_master=spark_master,
            analyze=analyze,
            duration=seconds,
            tick=make_tick(prog, task, pipeline.name, seconds or pipeline.workload.duration),
        )
    result = out.run
    print_result(console, result)
    console.print(f"  reproduce with: driftlab run {path} --seed {seed}")
    raise typer.Exit(result.exit_code)


@app.command()
def init(
    shape: Annotated[
        str,
        typer.Option(help=f"The pipeline's shape: {', '.join(SHAPES)}.", show_default=True),
    ] = "cdc-cache",
    path: Annotated[Path, typer.Argument(help="The file to write.", show_default=True)] = Path(
        "pipeline.toml"
    ),
    force: Annotated[bool, typer.Option(help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented starting pipeline file for your own pipeline.

    Edit its processes (your programs' command lines) and stores (how driftlab reads
    what they derive), then `driftlab run pipeline.toml`. docs/pipelines.md walks
    through it. Exit status: 0 written, 2 an unknown shape or an existing file.
    """
    err = Console(stderr=True, highlight=False)
    if shape not in SHAPES:
        raise fail(
            err,
            exitcodes.BAD_INPUT,
            f"--shape {shape!r} is unknown; use one of: {', '.join(SHAPES)}",
        )
    if path.exists() and not force:
        raise fail(err, exitcodes.BAD_INPUT, f"{path} exists; choose another path or add --force")
    path.write_text(starting_file(shape, path.stem))
    Console(highlight=False).print(
        escape(
            f"wrote {path} ({shape}); edit its [processes] and [stores], then: driftlab run {path}"
        )
    )
