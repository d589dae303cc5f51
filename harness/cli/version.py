"""`driftlab version`."""

from __future__ import annotations

import typer

from harness import __version__
from harness.cli.app import app
from harness.history.schema import SCHEMA_VERSION


@app.command()
def version() -> None:
    """Print driftlab's version and the history schema version it writes."""
    typer.echo(f"driftlab {__version__} (history schema {SCHEMA_VERSION})")
