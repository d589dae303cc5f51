"""`driftlab explore SETUP`: search the driftlab simulator for a minimal bad interleaving."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from driftlab.harness.cli.app import app
from driftlab.harness.cli.common import (
    BACKEND_OPTION,
    SPARK_MASTER_OPTION,
    STACK_DIR_OPTION,
    runs_dir_option,
    seed_in_range,
)
from driftlab.harness.cli.pipeline import is_pipeline_file
from driftlab.harness.history import exitcodes
from driftlab.scenarios.catalogue.architectures import SIMULATED_SETUPS

if TYPE_CHECKING:
    from driftlab.harness.lab.explore.search import SearchResult

_SETUP_LIST = "\n\n".join(
    f"{name}: {spec.summary} ({', '.join(spec.claims)})" for name, spec in SIMULATED_SETUPS.items()
)


_HELP = (
    "Search interleavings of clients, consumers and faults with Hypothesis.\n\n"
    "Runs the driftlab simulator (deterministic, in-process: a tool of its own, not a real "
    "run) on generated schedules, looking for one that breaks each property the claims "
    "table states for SETUP. A broken property is shrunk to its smallest schedule, printed "
    "step by step with the anomalies the reference checkers find in its history, and saved "
    "for `driftlab replay` to run on the real stack. A property expected to hold is "
    "reported as held over the schedules tried. Exit status 1 when an outcome differs from "
    "the claims table's prediction; the printed seed reproduces the search.\n\n"
    "Given a pipeline file (a path ending in .toml), searches its fault schedules on the "
    "real stack instead, within --budget or --runs: each candidate is one run as `driftlab "
    "run` makes it (faults at clock times and at moments of the run: a process's k-th ready "
    "line, another fault's start or end, a store lagging), mutations of the runs that "
    "showed something new are preferred, and a failing schedule is shrunk, each smaller "
    "one run again and kept when it fails 2 of 3 times. The minimal schedule is written as "
    "a pipeline file that `driftlab run` replays. Exit status: 1 a schedule broke an "
    "expectation; 0 none did within the budget; 2 bad input; 3 the lab failed."
)


@app.command(
    help=_HELP,
    epilog=f"Setups:\n\n{_SETUP_LIST}\n\nThe schedule file format is in docs/explore.md.",
)
def explore(
    setup: Annotated[
        str,
        typer.Argument(
            help="The simulated setup to explore (listed below), or a pipeline file "
            "(pipeline.toml) to explore on the real stack."
        ),
    ],
    examples: Annotated[
        int,
        typer.Option("--examples", "-n", min=1, help="Simulator: schedules to try per property."),
    ] = 500,
    seed: Annotated[
        int | None,
        typer.Option("--seed", help="Search seed (default: a random one).", callback=seed_in_range),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Where to save the minimal schedule (default: "
            "RUNS_DIR/explore/<setup>-<seed>.json; for a pipeline file, FILE.found-<seed>.toml "
            "beside it, whose relative paths it shares).",
        ),
    ] = None,
    runs_dir: Annotated[
        Path,
        runs_dir_option("The runs folder, where schedules (and a pipeline's runs) are saved."),
    ] = Path("runs"),
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            help="Simulator: also save the minimal schedule's history (a .jsonl segment).",
        ),
    ] = None,
    budget: Annotated[
        str | None,
        typer.Option(help="Pipeline file: wall-time budget, e.g. 10m (default 10m unless --runs)."),
    ] = None,
    runs: Annotated[
        int | None, typer.Option("--runs", min=1, help="Pipeline file: at most this many runs.")
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option(
            help="Pipeline file: each candidate's workload, e.g. 6s (default: the file's)."
        ),
    ] = None,
    shrink_runs: Annotated[
        int,
        typer.Option("--shrink-runs", min=1, help="Pipeline file: the shrinking's cap of runs."),
    ] = 20,
    plain: Annotated[
        bool,
        typer.Option(
            "--plain",
            help="Pipeline file: plain random schedules at clock times only, no moments "
            "and no mutations (to compare with).",
        ),
    ] = False,
    backend: Annotated[str, BACKEND_OPTION] = "local",
    stack_dir: Annotated[Path | None, STACK_DIR_OPTION] = None,
    spark_master: Annotated[str | None, SPARK_MASTER_OPTION] = None,
) -> None:
    """Search the driftlab simulator for a minimal schedule breaking SETUP's claims, or
    a pipeline file's fault schedules on the real stack (docs/explore-pipelines.md)."""
    if is_pipeline_file(setup):
        from driftlab.harness.cli.explore_pipeline import ExploreOptions, explore_pipeline

        options = ExploreOptions(
            budget=budget,
            runs=runs,
            seed=secrets.randbelow(2**32) if seed is None else seed,
            duration=duration,
            out=out,
            runs_dir=runs_dir,
            backend=backend,
            stack_dir=stack_dir,
            spark_master=spark_master,
            shrink_runs=shrink_runs,
            plain=plain,
        )
        raise typer.Exit(explore_pipeline(Path(setup), options))
    console = Console()
    if setup not in SIMULATED_SETUPS:
        console.print(
            f"[red]unknown setup {setup!r}[/]: choose one of {', '.join(SIMULATED_SETUPS)}"
        )
        raise typer.Exit(exitcodes.BAD_INPUT)
    seed = secrets.randbelow(2**32) if seed is None else seed
    # Beside the runs, never in the current folder (a repository's root, say).
    out = out if out is not None else runs_dir / "explore" / f"{setup}-{seed}.json"
    console.print(
        f"[bold]driftlab simulator[/]: {setup} ({SIMULATED_SETUPS[setup].summary}), seed {seed}"
    )
    # Here, not at the top: Hypothesis is no cost of the commands that do not search.
    from driftlab.harness.lab.explore.properties import properties_of
    from driftlab.harness.lab.explore.search import search

    results = []
    for prop in properties_of(setup):
        with console.status(f"searching: {prop.text} ({examples} schedules)"):
            result = search(SIMULATED_SETUPS[setup], prop, examples=examples, seed=seed)
        results.append(result)
        _show(console, result)
    _save(console, [r for r in results if r.found], out, history)
    surprises = [r for r in results if not r.as_predicted]
    for r in results:
        if r.found or not r.as_predicted:
            console.print(
                f"reproduce {r.prop.name}: driftlab explore {setup} --seed {r.seed} "
                f"--examples {examples}",
                soft_wrap=True,  # a command to copy: never broken across lines
            )
    if surprises:
        names = ", ".join(r.prop.name for r in surprises)
        console.print(f"[red bold]not as the claims table predicts[/]: {names}")
        raise typer.Exit(exitcodes.VERDICT)


def _show(console: Console, r: SearchResult) -> None:
    prop = r.prop
    verdict = "[green]as predicted[/]" if r.as_predicted else "[red]NOT as predicted[/]"
    console.print(
        f"\n[bold]{prop.name}[/] ({prop.claim}): {prop.text}; predicted to "
        f"{'hold' if prop.predicted == 'holds' else 'fail'}"
    )
    if not r.found:
        console.print(f"  held over {r.examples} schedules ({r.seconds:.1f} s): {verdict}")
        return
    assert r.run is not None
    console.print(
        f"  broken after {r.examples} schedules, shrunk in {r.shrink_runs} more runs "
        f"({r.seconds:.1f} s): {verdict}"
    )
    from driftlab.harness.lab.explore.schedule import describe

    for i, step in enumerate(r.run.executed, 1):
        console.print(f"  {i:>3}. {describe(step)}")
    table = Table(
        title="anomalies the reference checkers find",
        title_justify="left",
        caption="* breaks the property",
        caption_justify="left",
    )
    # Names are what a reader searches and types: whole on one line, piped or not; only
    # the detail wraps.
    cells = [
        (a.checker, a.kind + "*", a.store or "", a.key or "", a.consumer or "") for a in r.anomalies
    ]
    for i, col in enumerate(("checker", "kind", "store", "key", "consumer")):
        width = max([len(col), *(len(c[i]) for c in cells)])
        table.add_column(col, no_wrap=True, min_width=width)
    table.add_column("detail", overflow="fold")
    for a in r.anomalies:
        mark = "*" if a in r.breaking else ""
        table.add_row(
            a.checker, a.kind + mark, a.store or "", a.key or "", a.consumer or "", a.detail
        )
    console.print(table)
    if not r.breaking:
        seen = ", ".join(sorted({f[0] for f in r.run.findings if f[0] in prop.kinds}))
        console.print(
            f"  [yellow]the reference checkers do not confirm it[/]; the simulator's tally "
            f"saw: {seen}"
        )
    if r.missing_checkers:
        console.print(f"  reference checkers not present yet: {', '.join(r.missing_checkers)}")


def _save(console: Console, found: list[SearchResult], out: Path, history: Path | None) -> None:
    from driftlab.harness.lab.explore.sim.recorder import to_jsonl

    for i, r in enumerate(found):
        suffix = "" if i == 0 else f".{r.prop.name}"
        path = out.with_name(f"{out.stem}{suffix}{out.suffix}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            r.schedule().save(path)
            if history is not None and r.run is not None:
                hpath = history.with_name(f"{history.stem}{suffix}{history.suffix}")
                hpath.write_text(to_jsonl(r.run.events))
        except OSError as exc:
            console.print(
                f"[red]cannot write {exc.filename}[/]: {exc.strerror}; "
                "pass --out (and --history) in a writable directory"
            )
            raise typer.Exit(exitcodes.BAD_INPUT) from None
        console.print(f"saved {r.prop.name}'s minimal schedule to {path}", soft_wrap=True)
