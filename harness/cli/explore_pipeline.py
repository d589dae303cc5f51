"""`driftlab explore pipeline.toml`: search the pipeline's fault schedules on the real
stack, each candidate one run as `driftlab run` makes it, and shrink a failure."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from driftlab.harness.cli.common import (
    check_runs_dir,
    check_spark_master,
    enter_backend,
    fail,
    parse_duration,
    use_stack,
)
from driftlab.harness.cli.printing import progress
from driftlab.harness.history import exitcodes

if TYPE_CHECKING:
    from driftlab.harness.app.pipeline_search.search import Exploration, Step


DEFAULT_BUDGET_S = 600.0


@dataclass(frozen=True)
class ExploreOptions:
    """`driftlab explore FILE.toml`'s options, as given."""

    budget: str | None
    runs: int | None
    seed: int
    duration: str | None
    out: Path | None
    runs_dir: Path
    backend: str
    stack_dir: Path | None
    spark_master: str | None
    shrink_runs: int
    plain: bool


def explore_pipeline(path: Path, o: ExploreOptions) -> int:
    """Explore the pipeline file at `path`; the exit status (driftlab.harness.history.exitcodes)."""
    from driftlab.harness.app.pipeline_search.explore_file import explore_file, found_path
    from driftlab.harness.app.pipeline_search.search import Plan
    from driftlab.harness.app.pipeline_search.space import Space
    from driftlab.scenarios.pipeline.setup import refuse_images
    from driftlab.scenarios.pipeline.spec import PipelineError, load

    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    try:
        budget_s = parse_duration(o.budget)
        if budget_s is None and o.runs is None:
            budget_s = DEFAULT_BUDGET_S
        duration = parse_duration(o.duration)
        pipeline = load(path)
        if o.stack_dir is None:
            refuse_images(pipeline, o.backend)
        plan = Plan(
            seed=o.seed,
            budget_s=budget_s,
            runs=o.runs,
            shrink_cap=o.shrink_runs,
            guided=not o.plain,
        )
        plan.validate()
    except (PipelineError, ValueError, typer.BadParameter) as exc:
        raise fail(err, exitcodes.BAD_INPUT, str(exc)) from None
    space = Space.of(pipeline, duration)
    if not space.targets():
        raise fail(
            err,
            exitcodes.BAD_INPUT,
            f"{path} has no process, link or service an exploration may hurt (PostgreSQL, "
            "the source, is left alone); add your program as a [processes.<name>]",
        )
    check_runs_dir(o.runs_dir, err)
    check_spark_master(o.spark_master, err)
    what = (f"{o.runs} runs" if budget_s is None else f"{budget_s:.0f} s") + (
        "" if o.runs is None or budget_s is None else f" or {o.runs} runs"
    )
    console.print(
        f"[bold]driftlab explore[/] {escape(str(path))}: {len(space.processes)} process(es), "
        f"{len(space.links)} link(s), {len(space.services)} service(s); "
        f"{space.duration:g} s workloads; budget {what}; seed {o.seed}"
        + ("; plain random clock times" if o.plain else "")
    )
    with contextlib.ExitStack() as scope:
        options = _run_options(scope, o, err)
        prog = scope.enter_context(progress(console))
        task = prog.add_task("starting", total=None)
        show = _Show(console, prog, task, budget_s, o.runs)
        options["tick"] = show.tick
        try:
            ex = explore_file(pipeline, plan, duration, options, on_step=show.step)
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]")
            return exitcodes.INTERRUPTED
    out = o.out or found_path(path, o.seed)
    return _report(console, ex, path, out, o, command=_command(path, o))


def _run_options(scope: contextlib.ExitStack, o: ExploreOptions, err: Console) -> dict[str, Any]:
    """The candidates' run options: the stack in use and its warm Spark (else this
    process's, warmed now)."""
    from driftlab.harness.app.judge import judging_spark

    stack = use_stack(scope, o.stack_dir, o.backend, err)
    if stack is None:  # no `driftlab up`: one stack for every candidate, stopped at the end
        stack = enter_backend(scope, o.backend, err)
    server = judging_spark(stack, o.spark_master, o.runs_dir)
    return {
        "runs_dir": o.runs_dir,
        "stack": stack,
        "server": server,
        "spark_master": o.spark_master,
    }


class _Show:
    """The progress line (runs done, best so far, time left) and a line per run."""

    def __init__(
        self, console: Console, prog: Any, task: Any, budget_s: float | None, runs: int | None
    ) -> None:
        self.console, self.prog, self.task = console, prog, task
        self.budget_s, self.runs = budget_s, runs
        self.t0 = time.monotonic()
        self.head = "run 1"

    def _left(self) -> str:
        if self.budget_s is None:
            return ""
        left = max(0.0, self.budget_s - (time.monotonic() - self.t0))
        return f", {left / 60:.0f}m{left % 60:02.0f}s left"

    def tick(self, phase: str, elapsed: float, stats: object) -> None:
        """A run's own progress, after the exploration's."""
        self.prog.update(self.task, description=escape(f"{self.head}{self._left()}: {phase}"))

    def step(self, ex: Exploration, step: Step) -> None:
        """After each run: its line, and the progress line's head for the next."""
        t = step.trial
        what = (
            "[red]FAILED[/]"
            if t.failed
            else "[yellow]lab failed[/]"
            if t.lab_failed
            else "[green]held[/]"
        )
        found = ", ".join(f"{k} {v}" for k, v in sorted(t.kinds.items()))
        new = f"; new: {', '.join(step.new)}" if step.new else ""
        self.console.print(
            f"{step.index:>3} {step.phase:<7} {what} {escape(step.candidate.describe())}"
            + (f" [{escape(found)}]" if found else "")
            + escape(new)
            + (f" ({escape(t.note)})" if t.lab_failed and t.note else ""),
            soft_wrap=True,
        )
        of = f"/{self.runs}" if self.runs else ""
        self.head = f"run {ex.runs + 1}{of}; best: {ex.best()}"[:160]
        self.prog.update(self.task, description=escape(self.head + self._left()))


def _command(path: Path, o: ExploreOptions) -> str:
    """The command line that repeats this exploration's choices."""
    cmd = f"driftlab explore {path} --seed {o.seed}"
    if o.budget:
        cmd += f" --budget {o.budget}"
    if o.runs is not None:
        cmd += f" --runs {o.runs}"
    if o.duration:
        cmd += f" --duration {o.duration}"
    return cmd + (" --plain" if o.plain else "")


def _report(
    console: Console, ex: Exploration, path: Path, out: Path, o: ExploreOptions, command: str
) -> int:
    from driftlab.harness.app.pipeline_search.explore_file import write_outputs
    from driftlab.harness.app.pipeline_search.record import summary

    try:
        written = write_outputs(ex, path, out, o.runs_dir, command)
    except OSError as exc:
        console.print(
            f"[red]cannot write {exc.filename}[/]: {exc.strerror}; pass --out or --runs-dir "
            "in a writable folder"
        )
        return exitcodes.LAB_FAILED
    t = ex.minimal_trial
    if t is not None:
        console.print(f"failing run: {t.run_dir}")
        if t.report is not None:
            console.print(f"its report: {t.report}")
    if ex.shrink_note:
        console.print(f"[yellow]{ex.shrink_note}[/]: the schedule may not be the smallest")
    console.print(f"runs of this exploration: {written.log}")
    console.print(escape(summary(ex, path.stem, written.found)), soft_wrap=True)
    return ex.exit_code
