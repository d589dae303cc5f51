"""`driftlab run SCENARIO`: one scenario on the local stack, recorded and judged."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from driftlab.harness.cli.app import app
from driftlab.harness.cli.common import (
    BACKEND_OPTION,
    RUNS_DIR_OPTION,
    SPARK_MASTER_OPTION,
    STACK_DIR_OPTION,
    check_runs_dir,
    check_spark_master,
    fail,
    parse_duration,
    seed_in_range,
    use_stack,
)
from driftlab.harness.cli.printing import interrupted_line, make_tick, print_result, progress
from driftlab.harness.history import exitcodes


@app.command()
def run(
    scenario: Annotated[
        str,
        typer.Argument(
            help="A scenario name or claim id (see `driftlab suite --list`), or a "
            "pipeline file (pipeline.toml: see `driftlab init`).",
            show_default=False,
        ),
    ],
    seed: Annotated[
        int,
        typer.Option(help="Seed of every random choice of the run.", callback=seed_in_range),
    ] = 0,
    duration: Annotated[
        str | None,
        typer.Option(help="Workload duration, e.g. 10s or 1m (faults stretch with it)."),
    ] = None,
    clients: Annotated[
        int | None, typer.Option(min=1, help="Concurrent clients (default: the scenario's).")
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(min=0, help="Target ops/s of all clients together (0: unlimited)."),
    ] = None,
    runs_dir: Annotated[Path, RUNS_DIR_OPTION] = Path("runs"),
    spark_master: Annotated[str | None, SPARK_MASTER_OPTION] = None,
    analyze: Annotated[
        bool, typer.Option("--analyze/--no-analyze", help="Judge the history after the run.")
    ] = True,
    backend: Annotated[str, BACKEND_OPTION] = "local",
    stack_dir: Annotated[Path | None, STACK_DIR_OPTION] = None,
) -> None:
    """Run one scenario: workload and faults on the real stack, then the verdict.

    Uses the stack of `driftlab up` (or of `driftlab up --dir DIR` with --stack-dir)
    when it is running, else starts one for this run and stops it afterwards; the
    summary and logs/run.json's `stack` say which. The run
    is analysed on that stack's warm Spark (its `analysis` service) when it has one and
    no --spark-master is given, else by a Spark started in this process; a warm Spark
    that does not answer is left for this process's, with one line. Before
    the workload every link is healed and checked free of toxics, and what killed runs
    left (connectors, replication slots) is removed. Writes
    runs/<scenario>/<UTC time>-<seed>/ (config.json, history/, logs/, analysis files)
    and points runs/latest at it.

    Exit status: 0 reproduced (or no expectations); 1 not reproduced or an unexpected
    anomaly (the verdict only); 2 bad input; 3 the lab failed (a service down, a port
    taken, the Spark master unreachable, disk full, read-only runs folder), the lab
    recorded a failure of its own, or the run is inconclusive (no operation ran, a kind
    the claim names had no chance, a fault window never took effect or had no
    operation); 130 interrupted.

    A path ending in .toml runs your own pipeline from its file (docs/pipelines.md):
    its services on either backend, its processes on this machine as commands (or, on
    the docker backend, as containers of their `image`); its clients and rate are the
    file's [workload].

    Example: driftlab run C1 --seed 7 --duration 20s
    """
    from driftlab.harness.app.judge import judging_spark
    from driftlab.harness.app.run import check_scenario, run_scenario
    from driftlab.harness.cli.pipeline import (
        is_pipeline_file,
        pipeline_scenario,
        refuse_scenario_options,
    )
    from driftlab.harness.lab.runner.runner import note_interrupted
    from driftlab.harness.lab.runner.signals import interrupting
    from driftlab.scenarios.catalogue.registry import get_scenario

    err = Console(stderr=True, highlight=False)
    console = Console(highlight=False)
    from_file = is_pipeline_file(scenario)
    try:
        if from_file:
            refuse_scenario_options(clients=clients, rate=rate)
            on = backend if stack_dir is None else None
            sc = pipeline_scenario(Path(scenario), parse_duration(duration), on)
        else:
            sc = get_scenario(scenario).with_overrides(
                duration=parse_duration(duration), clients=clients, rate=rate
            )
        check_scenario(sc)
    except (KeyError, ValueError) as exc:
        raise fail(err, exitcodes.BAD_INPUT, str(exc.args[0] if exc.args else exc)) from None
    check_runs_dir(runs_dir, err)
    if analyze:
        check_spark_master(spark_master, err)
    result = None
    try:
        # Until the run hears signals itself, and after it: one line, exit 130.
        with interrupting("setup"), contextlib.ExitStack() as scope:
            stack = use_stack(scope, stack_dir, backend, err)
            prog = scope.enter_context(progress())
            task = prog.add_task(sc.name, total=None)
            # The warm Spark of the stack in use judges the run when it has one; else this
            # process's starts now, beside the run.
            server = judging_spark(stack, spark_master, runs_dir) if analyze else None
            result = run_scenario(
                sc,
                seed=seed,
                runs_dir=runs_dir,
                spark_master=spark_master,
                server=server,
                stack=stack,
                analyze=analyze,
                tick=make_tick(prog, task, sc.name, sc.workload.duration),
            )
    except KeyboardInterrupt:
        if result is None:
            raise fail(err, exitcodes.INTERRUPTED, "interrupted before the run began") from None
        note_interrupted(result, "teardown")
    if result.discarded:
        # Found before the workload: the one line, and no run folder to point at.
        raise fail(err, result.exit_code, result.error or "bad input")
    if result.interrupted:
        raise fail(err, result.exit_code, interrupted_line(result))
    print_result(console, result)
    if from_file:
        rerun = f"driftlab run {scenario} --seed {seed}"
        if stack_dir is None and backend != "local":
            rerun += f" --backend {backend}"
        console.print(f"  reproduce with: {rerun}")
    raise typer.Exit(result.exit_code)
