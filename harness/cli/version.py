"""`driftlab version`."""

from __future__ import annotations

import typer

from driftlab.harness import __version__
from driftlab.harness.cli.app import app
from driftlab.harness.history.schema import SCHEMA_VERSION


@app.command()
def version() -> None:
    """Print driftlab's version and the history schema version it writes."""
    typer.echo(f"driftlab {__version__} (history schema {SCHEMA_VERSION})")
