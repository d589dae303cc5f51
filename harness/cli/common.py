"""What the commands share: their common options and the checks that turn a bad one
into one line and an exit code (driftlab.harness.history.exitcodes)."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from driftlab.harness.history import exitcodes

if TYPE_CHECKING:
    from driftlab.harness.lab.services.stack_protocol import ServiceStack

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


def seed_in_range(value: int | None) -> int | None:
    """A --seed callback: the history keeps seeds as 64-bit integers."""
    if value is not None and not -(2**63) <= value < 2**63:
        raise typer.BadParameter(
            f"{value} does not fit in 64 bits; use a seed from -2^63 to 2^63-1"
        )
    return value


BACKEND_OPTION = typer.Option(
    "--backend",
    help="Stack backend: local (supervised processes, default) or docker (the same services "
    "in containers of driftlab's images; build them with scripts/docker-images).",
)

SPARK_MASTER_OPTION = typer.Option(
    "--spark-master",
    metavar="URL",
    help="Spark master URL for the analysis, e.g. spark://127.0.0.1:7077 for a standalone "
    "cluster (default: $DRIFTLAB_SPARK_MASTER or local[*], every core of this machine).",
)


def runs_dir_option(help: str) -> Any:
    """The --runs-dir option (an absolute path), with what the command writes there."""
    return typer.Option("--runs-dir", resolve_path=True, help=help)


RUNS_DIR_OPTION = runs_dir_option("Where run folders are written.")


def fail(err: Console, code: int, message: str) -> typer.Exit:
    """Print `error: message` (one line: the problem and its fix) and return the Exit
    to raise with `code` (driftlab.harness.history.exitcodes)."""
    err.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


def check_runs_dir(runs_dir: Path, err: Console) -> None:
    """Exit 2 before any run when --runs-dir cannot be a folder: it, or the nearest of
    its parents that exists, is a file."""
    for there in (runs_dir, *runs_dir.parents):
        if there.exists():
            if not there.is_dir():
                raise fail(
                    err,
                    exitcodes.BAD_INPUT,
                    f"--runs-dir {runs_dir}: {there} is a file, not a folder; "
                    "choose a folder for the run folders",
                )
            return


def check_spark_master(master: str | None, err: Console) -> None:
    """Before any scenario starts: exit 2 for a malformed --spark-master, 3 when the
    master does not answer (a run used to do all its work before finding out)."""
    if master is None and not os.environ.get("DRIFTLAB_SPARK_MASTER"):
        return  # local[*]: nothing to check, and no PySpark to import for it
    from driftlab.checkers.session import MasterUnreachable, check_master

    try:
        check_master(master)
    except ValueError as exc:
        raise fail(err, exitcodes.BAD_INPUT, f"--spark-master: {exc}") from None
    except MasterUnreachable as exc:
        raise fail(err, exitcodes.LAB_FAILED, str(exc)) from None


def enter_backend(scope: contextlib.ExitStack, backend: str, err: Console) -> ServiceStack:
    """An owned stack of `backend` for the command's runs, stopped when `scope` ends;
    exit 2 for an unknown backend, 3 when it cannot be had (no Docker engine)."""
    from driftlab.harness.lab.runner.stack_use import open_stack
    from driftlab.harness.lab.services.base import ServiceError

    try:
        return scope.enter_context(open_stack(backend))
    except ValueError as exc:
        raise fail(err, exitcodes.BAD_INPUT, str(exc)) from None
    except ServiceError as exc:
        raise fail(err, exitcodes.LAB_FAILED, str(exc)) from None


def attach_stack(stack_dir: Path, err: Console) -> Any:
    """The running stack of `driftlab up --dir stack_dir`; exit 2 when there is none,
    3 when it is not running."""
    from driftlab.harness.lab.runner.stack_use import stack_at

    try:
        return stack_at(stack_dir)
    except exitcodes.BadInput as exc:
        raise fail(err, exitcodes.BAD_INPUT, str(exc)) from None
    except exitcodes.LabFailure as exc:
        raise fail(err, exitcodes.LAB_FAILED, str(exc)) from None


STACK_DIR_OPTION = typer.Option(
    "--stack-dir",
    metavar="DIR",
    help="Use the running stack of `driftlab up --dir DIR` (default: the user's stack of a "
    "plain `driftlab up`, in $DRIFTLAB_STACK_DIR or docs/stack.md's folder, if it runs, "
    "else a stack of the command's own).",
)


def use_stack(
    scope: contextlib.ExitStack, stack_dir: Path | None, backend: str, err: Console
) -> ServiceStack | None:
    """The stack a command's runs use (the value of STACK_DIR_OPTION and BACKEND_OPTION):
    the running stack of `stack_dir` (exit 2 when there is none, 3 when it is not
    running); with the docker backend an owned stack of containers, stopped when `scope`
    ends; else the user's running `driftlab up` stack, or None when there is none (the
    command then starts a stack of its own)."""
    if stack_dir is not None:
        return attach_stack(stack_dir, err)
    if backend != "local":
        return enter_backend(scope, backend, err)
    from driftlab.harness.lab.runner.stack_use import running_stack
    from driftlab.harness.lab.services.base import ServiceError

    try:
        return running_stack()
    except ServiceError as exc:
        raise fail(err, exitcodes.LAB_FAILED, str(exc)) from None
