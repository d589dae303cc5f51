"""`driftlab suite`: every claim's scenario on one shared stack, and the suite index."""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from driftlab.harness.cli.app import app
from driftlab.harness.cli.common import (
    BACKEND_OPTION,
    SPARK_MASTER_OPTION,
    STACK_DIR_OPTION,
    check_runs_dir,
    check_spark_master,
    parse_duration,
    runs_dir_option,
    seed_in_range,
    use_stack,
)
from driftlab.harness.cli.printing import (
    make_tick,
    print_caveats,
    print_result,
    progress,
    verdict_word,
)
from driftlab.harness.history import exitcodes

if TYPE_CHECKING:
    from driftlab.harness.lab.runner.runner import RunResult
    from driftlab.harness.lab.runner.workload_driver import Tick
    from driftlab.harness.lab.services.stack_protocol import ServiceStack


@app.command()
def suite(
    list_: Annotated[
        bool, typer.Option("--list", help="List the registered claims and scenarios; run none.")
    ] = False,
    only: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated claim ids to run, e.g. C1,C2 (default: all), and pipeline "
            "files (a path ending in .toml; with files only, no claim runs)."
        ),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option(help="Workload duration of every scenario, e.g. 10s (default: each one's)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of every run.", callback=seed_in_range)] = 0,
    runs_dir: Annotated[
        Path,
        runs_dir_option("Where run folders and the index go."),
    ] = Path("runs"),
    spark_master: Annotated[str | None, SPARK_MASTER_OPTION] = None,
    backend: Annotated[str, BACKEND_OPTION] = "local",
    stack_dir: Annotated[Path | None, STACK_DIR_OPTION] = None,
) -> None:
    """Run the scenario of every claim of docs/claims.md on one shared stack.

    The stack is that of `driftlab up` (or of `driftlab up --dir DIR` with --stack-dir)
    when it is running, else one of the suite's own, stopped at its end; the first
    line says which.

    Writes one run folder per scenario, then runs/index.json (and runs/index.html when
    the report module is installed). Exit status: 0 when every verdict is the expected
    one; 1 when some is not (the verdict only); 2 bad input; 3 when the lab failed (a
    run could not complete or was inconclusive, the Spark master is unreachable);
    130 interrupted.

    Example: driftlab suite --only C1,C13 --duration 10s

    Your pipelines, nightly: driftlab suite --only mirror.toml,app.toml
    """
    from driftlab.harness.app.run import check_scenario
    from driftlab.harness.cli.pipeline import pipeline_scenario
    from driftlab.harness.lab.runner.stack_use import check_backend
    from driftlab.scenarios.catalogue.registry import all_scenarios, claims_scenarios

    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    if list_:
        _list(console, all_scenarios())
        return
    try:
        check_backend(backend)
        wanted = only.split(",") if only else None
        files = [w for w in wanted or [] if w.endswith(".toml")]
        claims = [w for w in wanted or [] if not w.endswith(".toml")]
        chosen = claims_scenarios(claims or None) if claims or not files else []
        secs = parse_duration(duration)
        chosen = [sc.with_overrides(duration=secs) for sc in chosen]
        chosen += [pipeline_scenario(Path(f), secs, backend) for f in files]
        for sc in chosen:
            check_scenario(sc)
    except (KeyError, ValueError) as exc:
        err.print(f"[red]error:[/] {exc.args[0] if exc.args else exc}")
        raise typer.Exit(exitcodes.BAD_INPUT) from None
    if not chosen:
        err.print("[red]error:[/] no scenario registered for any claim")
        raise typer.Exit(exitcodes.BAD_INPUT)
    check_runs_dir(runs_dir, err)
    check_spark_master(spark_master, err)
    with contextlib.ExitStack() as scope:
        stack = use_stack(scope, stack_dir, backend, err)
        code = _run(console, chosen, seed, runs_dir, spark_master, backend, stack)
    raise typer.Exit(code)


def _run(
    console: Console,
    chosen: list[Any],
    seed: int,
    runs_dir: Path,
    spark_master: str | None,
    backend: str,
    stack: ServiceStack | None,
) -> int:
    """Run the suite with its progress line and per-run lines; print its table."""
    from driftlab.harness.app.suite import run_suite, services_of
    from driftlab.harness.lab.runner.stack_use import stack_line, stack_used

    if stack is not None:
        console.print(stack_line(stack_used(stack)), soft_wrap=True)
    else:
        console.print("stack: the suite's own, in /tmp (stopped at its end)")
    with progress() as prog:
        task = prog.add_task(f"starting {', '.join(services_of(chosen))}", total=None)

        def tick_for(label: str, sc: Any) -> Tick:
            return make_tick(prog, task, label, sc.workload.duration)

        def done(label: str, result: RunResult) -> None:
            word = verdict_word(result) or result.error or "not judged"
            prog.console.print(f"{label}: [bold]{word}[/] ({result.wall_s:.0f} s)")

        out = run_suite(
            chosen,
            seed=seed,
            runs_dir=runs_dir,
            spark_master=spark_master,
            backend=backend,
            stack=stack,
            tick_for=tick_for,
            done=done,
        )
    if out.error is not None:
        console.print(f"[red]error:[/] {escape(out.error)}")
        return out.exit_code
    if out.index is None:
        console.print("[yellow]interrupted[/]")
        return out.exit_code
    _table(console, chosen, out.results, out.wall_s)
    console.print(f"index: {out.index}")
    if out.interrupted:
        for r in out.results[-1:]:
            print_result(console, r)
    return out.exit_code


def _list(console: Console, registry: dict[str, Any]) -> None:
    """One scenario per line (claim, name, setup, seconds), the claim's sentence (once
    per claim) or the scenario's summary (a variant of a claim, a control case) and its
    expectations wrapped below it: names are what a user types next, so nothing is ever
    shortened, and the listing reads the same piped, in a file or in an 80-column
    terminal."""
    from driftlab.reports.claims import CLAIMS

    said: set[str] = set()
    name_w = max((len(name) for name in registry), default=8)
    setup_w = max((len(sc.setup) for sc in registry.values()), default=5)
    claim_w = max((len(sc.claim or "-") for sc in registry.values()), default=3)
    width = max(console.width, 60)
    for sc in registry.values():
        head = f"{sc.claim or '-':<{claim_w}} {sc.name:<{name_w}}  {sc.setup:<{setup_w}}"
        console.print(f"{head}  {sc.workload.duration:.0f} s", markup=False, soft_wrap=True)
        sentence = CLAIMS.get(sc.claim or "")
        if sentence is None or sc.claim in said:
            sentence = sc.summary
        said.add(sc.claim or "")
        exp = ", ".join(f"{k}={v}" for k, v in sc.expectations.items()) or "(none)"
        for text in (sentence, f"expects {exp}"):
            for line in textwrap.wrap(
                text,
                width=width,
                initial_indent="    ",
                subsequent_indent="      ",
                break_on_hyphens=False,
            ):
                console.print(line, markup=False, soft_wrap=True)


def _table(console: Console, chosen: list[Any], results: list[RunResult], wall: float) -> None:
    table = Table(title=f"claims suite ({wall:.0f} s)", title_justify="left", show_edge=False)
    table.add_column("claim")
    table.add_column("scenario")
    table.add_column("ops/s", justify="right")
    table.add_column("verdict")
    for r in results:
        sc = next(s for s in chosen if s.name == r.scenario)
        verdict = verdict_word(r) or r.error or "not judged"
        style = "green" if r.exit_code == exitcodes.OK else "red"
        table.add_row(sc.claim or "-", sc.name, f"{r.stats.rate:.0f}", verdict, style=style)
    console.print(table)
    # What does not change a verdict but its reader must know: untested kinds, a fault
    # window that slipped, a fault that never took effect under a found anomaly.
    for r in results:
        if r.caveats:
            console.print(f"{r.scenario}:")
            print_caveats(console, r.caveats, "  ")
