"""`driftlab up | down | status`: a stack by itself (local processes or containers)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import psycopg
import typer
from rich.console import Console
from rich.table import Table

from driftlab.harness.cli.app import app
from driftlab.harness.cli.common import BACKEND_OPTION
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.runner.clean_stack import find_leftovers, live_namespaces
from driftlab.harness.lab.runner.stack_use import up_command
from driftlab.harness.lab.services.analysis import ANALYSIS
from driftlab.harness.lab.services.backends import attach_stack
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.kinds import REGISTRY, default_services
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.services.stack_home import default_stack_dir
from driftlab.harness.lab.services.stack_lock import stack_lock
from driftlab.harness.lab.services.stack_state import STATE_FILE

StackDir = Annotated[
    Path | None,
    typer.Option(
        "--dir",
        help="The stack folder (data, logs, stack.json); default: $DRIFTLAB_STACK_DIR, else "
        "the user's own (docs/stack.md), whatever the current folder.",
        show_default=False,
    ),
]
console = Console()


def _stack_class(backend: str) -> type[Stack]:
    """The Stack class of `backend`; exit 2 for an unknown one."""
    if backend == "local":
        return Stack
    if backend == "docker":
        from driftlab.harness.lab.services.docker_backend import DockerStack

        return DockerStack
    raise _fail(
        ServiceError(f"unknown backend {backend!r}; use --backend local or --backend docker"),
        exitcodes.BAD_INPUT,
    )


def _fail(error: Exception, code: int = exitcodes.LAB_FAILED) -> typer.Exit:
    """Print the error (the problem and its fix) and return the Exit to raise: 2 for bad
    input (an unknown service, a folder with no stack), 3 by default (the lab failed)."""
    # Plain text: error messages hold paths and commands that must not be re-wrapped.
    typer.echo(f"error: {error}", err=True)
    return typer.Exit(code)


def _attach(root: Path, backend: str = "local") -> Stack:
    """The stack in `root`; exit 2 when there is none, 3 when its state is unreadable
    (or no Docker engine answers for a docker stack)."""
    if not (root / STATE_FILE).exists():
        up = up_command(root)
        raise _fail(
            ServiceError(f"no stack in {root.absolute()} (no {STATE_FILE}); start one with `{up}`"),
            exitcodes.BAD_INPUT,
        )
    try:
        return attach_stack(root, _stack_class(backend))
    except ServiceError as error:
        raise _fail(error) from None


def _show(stack: Stack) -> bool:
    """Print the services and links; True when every service answers and Toxiproxy
    has every link the stack made (what a run needs, not only live processes)."""
    table = Table(title=f"stack {stack.root}", title_justify="left")
    for column in ("service", "pid", "port", "state", "log"):
        table.add_column(column)
    rows = stack.status()
    for row in rows:
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
    ready = bool(rows) and all(row.healthy for row in rows)
    toxiproxy = stack.services.get("toxiproxy")
    if stack.links_made and (toxiproxy is None or not toxiproxy.is_running()):
        # Plain line, never wrapped: nothing listens on a link while Toxiproxy is down.
        typer.echo(
            f"links: none listening ({len(stack.links_made)} made), toxiproxy is not "
            f"running; `{up_command(stack.root)}` brings it back with them"
        )
    elif stack.links_made:
        links = Table(title="links (through toxiproxy)", title_justify="left")
        for column in ("link", "listens on"):
            links.add_column(column)
        for name, link in sorted(stack.links_made.items()):
            links.add_row(name, f"{link['host']}:{link['port']}")
        console.print(links)
    if toxiproxy is not None and toxiproxy.is_running():
        try:
            lost = stack.links.missing()
        except ServiceError as error:
            typer.echo(f"links not checked: {error}")
            return False
        for name in lost:
            # Plain lines, never wrapped: scripts and tests read them.
            typer.echo(
                f"missing: link {name}: toxiproxy lost it (a restart); "
                f"`{up_command(stack.root)}` restores it"
            )
        ready = ready and not lost
    return ready


@app.command()
def up(
    only: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated services to start (default: all of them, and with the "
            "local backend the `analysis` server, a warm Spark for `driftlab analyze`)."
        ),
    ] = None,
    root: StackDir = None,
    backend: Annotated[str, BACKEND_OPTION] = "local",
) -> None:
    """Start the stack and leave it running for `driftlab run`.

    PostgreSQL, Redis, RabbitMQ, NATS, Kafka, Connect and Toxiproxy (and with the local
    backend a warm Spark for `driftlab analyze`); `driftlab down` stops it. Exit status:
    0 up, 2 an unknown service, 3 a service that would not start (a port taken, a
    missing program)."""
    root = root or default_stack_dir()
    names = [n.strip() for n in only.split(",") if n.strip()] if only else default_services()
    if only is None and backend == "local":
        names.append(ANALYSIS)
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        known = ", ".join(REGISTRY)
        raise _fail(
            ServiceError(f"unknown service(s) {', '.join(unknown)}; known: {known}"),
            exitcodes.BAD_INPUT,
        )
    cls = _stack_class(backend)
    begun = time.monotonic()
    try:
        with stack_lock(root, on_wait=lambda: _waiting(root)):
            stack = attach_stack(root, cls) if (root / STATE_FILE).exists() else cls(root)
            # A stack started here outlives this command, whoever started the folder
            # before.
            stack.owned = False
            for service in stack.services.values():
                service.spec.die_with_parent = False
            with console.status("starting services") as status:

                def progress(name: str, event: str) -> None:
                    status.update(f"{name}: {event}")
                    console.print(f"  {name}: {event}", highlight=False)

                stack.up(*names, progress=progress)
    except ServiceError as error:
        raise _fail(error) from None
    console.print(f"[green]up[/green] in {time.monotonic() - begun:.1f}s")
    if not _show(stack):
        raise typer.Exit(exitcodes.LAB_FAILED)


def _waiting(root: Path) -> None:
    console.print(
        f"another `driftlab up` or `down` is working on {root}; waiting for it to finish",
        highlight=False,
    )


@app.command()
def status(root: StackDir = None, backend: Annotated[str, BACKEND_OPTION] = "local") -> None:
    """Show the stack's services, links, active toxics and leftovers of dead runs.

    Each service with its pid, port, health and log; each link with its active toxics;
    what runs no longer alive left behind (connectors, replication slots), which the
    next run removes, or which services were down so it could not look; the runs in
    progress. Exit status: 0 up; 3 no stack in the folder (one line, as `down` with
    nothing to stop exits 0 with one) or some service not running."""
    root = root or default_stack_dir()
    if backend == "local" and not (root / STATE_FILE).exists():
        # Not up, as `down` with nothing to stop is not an error: an answer, not a
        # mistake of the command line.
        typer.echo(
            f"no stack in {root.absolute()} (no {STATE_FILE}); start one with `{up_command(root)}`"
        )
        raise typer.Exit(exitcodes.LAB_FAILED)
    stack = _attach(root, backend)
    ready = _show(stack)
    try:
        leftovers = find_leftovers(stack)
    except (ServiceError, OSError, psycopg.Error) as error:
        typer.echo(f"leftovers not checked: {error}")
    else:
        # Plain lines, never wrapped: scripts and tests read them. Toxics are "active":
        # a run in progress has its own; a dead run's are removed by the next run.
        for line in leftovers.lines():
            typer.echo(f"{'active' if line.startswith('link ') else 'leftover'}: {line}")
        for service in leftovers.unchecked:
            typer.echo(f"leftovers not checked: {service} is not running")
        if not leftovers.lines() and not leftovers.unchecked:
            typer.echo("no active toxics, no leftovers of earlier runs")
    for namespace in sorted(live_namespaces(stack)):
        typer.echo(f"run in progress: {namespace}")
    if not ready:
        raise typer.Exit(exitcodes.LAB_FAILED)


@app.command()
def down(root: StackDir = None, backend: Annotated[str, BACKEND_OPTION] = "local") -> None:
    """Stop every service of the stack, including one whose harness died.

    With --backend docker, also remove the containers of any driftlab stack whose
    folder is gone (a killed run's). Exit status: 0 stopped, already down or nothing to
    stop (no stack in the folder), 3 no Docker engine."""
    root = root or default_stack_dir()
    if backend == "docker":
        _down_docker(root)
        return
    if not (root / STATE_FILE).exists():
        # Nothing to stop is what `down` wants: not an error.
        console.print(f"nothing to stop: no stack in {root.absolute()}", soft_wrap=True)
        return
    with stack_lock(root, on_wait=lambda: _waiting(root)):
        stack = _attach(root, backend)
        running = [name for name, s in stack.services.items() if s.is_running()]
        with console.status("stopping " + ", ".join(running) if running else "nothing running"):
            stack.down()
    console.print(f"[green]down[/green]: stopped {', '.join(running) or 'nothing (already down)'}")


def _down_docker(root: Path) -> None:
    """`driftlab down --backend docker`: the stack in `root`, if any, and every container
    left by dead stacks; nothing to stop is not an error here."""
    from driftlab.harness.lab.services.docker_backend import down_all

    try:
        with console.status("removing driftlab containers"):
            removed = down_all(root)
    except ServiceError as error:
        raise _fail(error) from None
    console.print(f"[green]down[/green]: removed {', '.join(removed) or 'no container'}")
