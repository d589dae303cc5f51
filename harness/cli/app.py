"""The `driftlab` Typer application every subcommand registers itself on."""

from __future__ import annotations

import typer

from driftlab.harness.history import exitcodes

app = typer.Typer(
    name="driftlab",
    help=(
        "A consistency test harness and fault-injection lab for data-integration "
        "architectures.\n\n"
        "Run a scenario against real PostgreSQL, Kafka/Debezium, Redis, RabbitMQ and "
        "NATS under crashes, partitions and slowdowns; record its history; judge it "
        "with PySpark checkers; read the verdict in an HTML report.\n\n" + exitcodes.HELP
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Keeps `driftlab` a group of subcommands even while it has only one."""
