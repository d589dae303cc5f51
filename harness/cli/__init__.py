"""The `driftlab` command. Each subcommand lives in a module of this package."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="driftlab",
    help=(
        "A consistency test harness and fault-injection lab for data-integration "
        "architectures.\n\n"
        "Run a scenario against real PostgreSQL, Kafka/Debezium, Redis, RabbitMQ and "
        "NATS under crashes, partitions and slowdowns; record its history; judge it "
        "with PySpark checkers; read the verdict in an HTML report."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Keeps `driftlab` a group of subcommands even while it has only one."""


def main() -> None:
    """Entry point of the console script."""
    app()


# Subcommands register themselves on `app` when their module is imported.
from harness.cli import (  # noqa: E402,F401
    analyze,
    explore,
    matrix,
    replay,
    report,
    run,
    stack,
    suite,
    version,
)
