"""`driftlab run pipeline.toml` and `driftlab init`: your own pipeline, from a file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from driftlab.harness.cli.app import app
from driftlab.harness.cli.common import fail
from driftlab.harness.history import exitcodes
from driftlab.scenarios.pipeline.shapes import SHAPES, starting_file

if TYPE_CHECKING:
    from driftlab.harness.lab.scenario import Scenario


def is_pipeline_file(argument: str) -> bool:
    """Whether `driftlab run`'s argument names a pipeline file rather than a scenario."""
    return argument.endswith(".toml")


def refuse_scenario_options(*, clients: int | None, rate: float | None) -> None:
    """Exit 2 for the options of `driftlab run` that a pipeline file does not take."""
    err = Console(stderr=True, highlight=False)
    if clients is not None or rate is not None:
        raise fail(
            err,
            exitcodes.BAD_INPUT,
            "--clients and --rate do not apply to a pipeline file; set clients and rate "
            "in its [workload]",
        )


def pipeline_scenario(path: Path, duration: float | None, backend: str | None = None) -> Scenario:
    """The scenario of the pipeline file at `path`, carrying its setup; PipelineError
    names what is wrong, an `image` process on a `backend` other than docker included
    (None: a stack given by its folder, whose setup checks)."""
    from driftlab.harness.app.pipeline import scenario_for
    from driftlab.scenarios.pipeline.setup import refuse_images
    from driftlab.scenarios.pipeline.spec import load

    pipeline = load(path)
    if backend is not None:
        refuse_images(pipeline, backend)
    return scenario_for(pipeline, duration)


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
    text = starting_file(shape, path.stem)
    path.write_text(text)
    # A file of connectors only has no program of yours to fill in: it runs as written.
    edit = "[processes] and [stores]" if "[processes." in text else "[[connectors]] and [stores]"
    Console(highlight=False).print(
        escape(f"wrote {path} ({shape}); edit its {edit}, then: driftlab run {path}")
    )
