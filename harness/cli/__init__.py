"""The `driftlab` command. Each subcommand lives in a module of this package and
registers itself on `driftlab.harness.cli.app.app`; `main` is the console script."""

from __future__ import annotations

import atexit
import gc
import inspect
import logging
import os
import re
import sys
import traceback

import typer

from driftlab.harness.cli.app import app
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.runner.workload_driver import CLIENTS_LEFT


def main() -> None:
    """Entry point of the console script."""
    # Logs belong in the run directory (the runner and analyze attach file handlers).
    # Without a handler of its own, the first module-level `logging.info()` of a
    # library (py4j does this) would install a stderr handler on the root logger and
    # flood the terminal with every INFO line of every later run.
    logging.getLogger().addHandler(logging.NullHandler())
    # A log file on a full disk must not print a traceback for every record it drops.
    logging.raiseExceptions = False
    # Stack and run folders (and what the servers write in them) are never writable by
    # other users, whatever the umask: write permission for group and others is masked.
    os.umask(os.umask(0o022) | 0o022)
    # What the imports made lives as long as the process: out of the collector's sight,
    # it is not walked again by each full collection of the run nor once more at exit
    # (on a loaded machine about a second of a command's wall time). Only the command's
    # own process freezes: a library (DuckDB's nanobind) imported earlier by a test
    # session would count its frozen objects as leaked at exit.
    gc.collect()
    gc.freeze()
    try:
        app()
    except SystemExit as done:
        code: int | str | None = done.code
    except Exception as exc:
        # Python's own exit status for an uncaught exception is 1, which says "forbidden
        # anomaly": a failure of the lab must never read as a verdict.
        described = exitcodes.describe(exc)
        if described is None:
            traceback.print_exc()
            described = (
                exitcodes.LAB_FAILED,
                f"internal error ({type(exc).__name__}): a bug in driftlab; "
                "please report it with the traceback above",
            )
        code, message = described
        typer.echo(f"error: {message}", err=True)
    else:
        code = 0
    if CLIENTS_LEFT.is_set():
        _exit_unfinalized(code)
    sys.exit(code)


def _exit_unfinalized(code: int | str | None) -> None:
    """End the process as `sys.exit(code)` would, less the interpreter's finalization:
    the exit handlers run (logs flushed, run files closed), then the process ends while
    the clients a stopped run left behind are still inside their native calls."""
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()  # what a normal exit runs before finalization
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


# Subcommands register themselves on `app` when their module is imported. Their imports
# make some hundred thousand objects that live as long as the process: the collector,
# walking them again and again while they are made, is off meanwhile (`main` then
# freezes them out of its sight).
gc.disable()
try:
    from driftlab.harness.cli import (  # noqa: F401
        analyze,
        explore,
        matrix,
        pipeline,
        replay,
        report,
        run,
        stack,
        suite,
        version,
    )
finally:
    gc.enable()


def _reflowable(doc: str) -> str:
    """`doc` with each paragraph on one line, for the help to wrap at the terminal's
    width: rich keeps a docstring's line breaks and wraps again around them, which left
    lines of a word or two. A paragraph whose later lines are indented (an example)
    keeps its breaks."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(p if re.search(r"\n\s", p) else p.replace("\n", " ") for p in paragraphs)


def _reflow_help() -> None:
    """Give every registered command its help with reflowable paragraphs."""
    for info in app.registered_commands:
        doc = info.help if info.help is not None else inspect.getdoc(info.callback)
        if doc:
            info.help = _reflowable(doc)


_reflow_help()
