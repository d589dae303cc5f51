"""`driftlab up | down | status`: the local stack by itself."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from harness.cli import app
from harness.services.base import ServiceError
from harness.services.stack import (
    DEFAULT_STACK_DIR,
    REGISTRY,
    STATE_FILE,
    Stack,
    default_services,
)

StackDir = Annotated[
    Path,
    typer.Option("--dir", help="The stack folder (data, logs, stack.json)."),
]
console = Console()


def _fail(error: ServiceError) -> typer.Exit:
    # Plain text: error messages hold paths and commands that must not be re-wrapped.
    typer.echo(f"error: {error}", err=True)
    return typer.Exit(1)


def _show(stack: Stack) -> None:
    table = Table(title=f"stack {stack.root}", title_justify="left")
    for column in ("service", "pid", "port", "state", "log"):
        table.add_column(column)
    for row in stack.status():
        state = (
            "[green]healthy[/green]"
            if row.healthy
            else "[yellow]running, not answering[/yellow]"
            if row.running
            else "[red]stopped[/red]"
        )
        pids = " ".join(
            str(pid) if role == "main" else f"{role}:{pid}" for role, pid in row.pids.items()
        )
        table.add_row(row.name, pids or "-", str(row.port or "-"), state, str(row.log_path))
    console.print(table)
    if stack.links_made:
        links = Table(title="links (through toxiproxy)", title_justify="left")
        for column in ("link", "listens on"):
            links.add_column(column)
        for name, link in sorted(stack.links_made.items()):
            links.add_row(name, f"{link['host']}:{link['port']}")
        console.print(links)


@app.command()
def up(
    only: Annotated[
        str | None,
        typer.Option(help="Comma-separated services to start (default: all of them)."),
    ] = None,
    root: StackDir = DEFAULT_STACK_DIR,
) -> None:
    """Start the local stack (PostgreSQL, Redis, RabbitMQ, NATS, Toxiproxy, ...) and leave
    it running for `driftlab run`; `driftlab down` stops it."""
    names = [n.strip() for n in only.split(",") if n.strip()] if only else default_services()
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        known = ", ".join(REGISTRY)
        raise _fail(ServiceError(f"unknown service(s) {', '.join(unknown)}; known: {known}"))
    try:
        stack = Stack.attach(root) if (root / STATE_FILE).exists() else Stack(root)
        # A stack started here outlives this command, whoever started the folder before.
        stack.owned = False
        for service in stack.services.values():
            service.spec.die_with_parent = False
        begun = time.monotonic()
        with console.status("starting services") as status:

            def progress(name: str, event: str) -> None:
                status.update(f"{name}: {event}")
                console.print(f"  {name}: {event}", highlight=False)

            stack.up(*names, progress=progress)
    except ServiceError as error:
        raise _fail(error) from None
    console.print(f"[green]up[/green] in {time.monotonic() - begun:.1f}s")
    _show(stack)


@app.command()
def status(root: StackDir = DEFAULT_STACK_DIR) -> None:
    """Show each service of the stack: pids, port, health, log."""
    try:
        stack = Stack.attach(root)
    except ServiceError as error:
        raise _fail(error) from None
    _show(stack)
    if not stack.is_up():
        raise typer.Exit(3)


@app.command()
def down(root: StackDir = DEFAULT_STACK_DIR) -> None:
    """Stop every service of the stack, including one whose harness died."""
    try:
        stack = Stack.attach(root)
    except ServiceError as error:
        raise _fail(error) from None
    running = [name for name, s in stack.services.items() if s.is_running()]
    with console.status("stopping " + ", ".join(running) if running else "nothing running"):
        stack.down()
    console.print(f"[green]down[/green]: stopped {', '.join(running) or 'nothing (already down)'}")
