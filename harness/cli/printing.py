"""What the commands print while they work and when they are done: the progress line
and the summary of a run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from driftlab.checkers.verdict import LAB_FAILED

if TYPE_CHECKING:
    from driftlab.harness.lab.runner.runner import RunResult


def progress(console: Console | None = None) -> Progress:
    """The terminal progress line shared by `run`, `suite` and `analyze`."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def make_tick(
    prog: Progress, task: TaskID, label: str, duration: float
) -> Callable[[str, float, object], None]:
    """A runner tick that shows the phase, the elapsed workload time and the op count."""

    def tick(phase: str, elapsed: float, stats: object) -> None:
        if phase == "workload":
            ops = getattr(stats, "ops", 0)
            text = f"{label}: workload {elapsed:4.1f}/{duration:.0f} s, {ops:,} ops"
        else:
            text = {
                "stack": f"{label}: starting services",
                "quiesce": f"{label}: healed; waiting for the pipelines to drain",
                "analyze": f"{label}: analysing the history (Spark in this process)",
                # driftlab.harness.app.judge.ON_SERVER
                "analyze-warm": f"{label}: analysing the history (on the warm Spark "
                "of `driftlab up`)",
            }.get(phase, f"{label}: {phase}")
        prog.update(task, description=text)

    return tick


def interrupted_line(r: RunResult) -> str:
    """The one line of a run stopped by SIGINT or SIGTERM: in which phase, and what its
    run folder holds."""
    where = r.interrupted_in or "run"
    if where == "report":
        left = f"the verdict is in {r.run_dir}; `driftlab report {r.run_dir}` renders it"
    elif r.analysis_interrupted:
        left = f"the history is complete: `driftlab analyze {r.run_dir}` judges it"
    elif where == "teardown":
        left = f"the run in {r.run_dir} had ended"
    else:
        left = (
            "faults healed, history closed without its end mark: "
            f"`driftlab analyze {r.run_dir}` still reads it"
        )
    return f"interrupted during the {where}; {left}"


def lost_where_lines(lost_where: dict[str, dict[str, int]]) -> list[str]:
    """One line per lost kind whose rows say where the loss went (analysis.json's
    `lost_where`): still in the broker's log, or not."""
    out = []
    for kind, where in lost_where.items():
        if where.get("in the log") or where.get("not in the log"):
            unknown = f", {where['unknown']:,} not known" if where.get("unknown") else ""
            out.append(
                f"{kind}: {where['in the log']:,} still in the broker's log (the consumer "
                f"skipped them), {where['not in the log']:,} not in it (the broker lost "
                f"them, or retention or compaction removed them){unknown}"
            )
    return out


def print_caveats(console: Console, caveats: list[str], indent: str = "") -> None:
    """What does not change the verdict but a reader must know (analysis.json's
    `caveats`): named kinds that were not tested, fault windows that slipped or never
    took effect under a verdict that does not rest on them."""
    for line in caveats:
        console.print(f"{indent}[yellow]note:[/] {escape(line)}")


def verdict_word(r: RunResult) -> str | None:
    """The run's verdict as a reader is told it, as its report says it: analysis.json's
    word, and `held` for a run analysed before `held` was a verdict of its own
    (driftlab.checkers.verdict.shown_verdict)."""
    from driftlab.checkers.verdict import shown_verdict

    if r.verdict is None:
        return None
    return shown_verdict(r.verdict, r.expectations)


def print_result(console: Console, r: RunResult) -> None:
    """The short summary of one run: where, how much, what verdict."""
    s = r.stats
    console.print(
        f"[bold]{r.scenario}[/] seed {r.seed}: {s.ops:,} ops in {s.elapsed:.1f} s "
        f"({s.rate:.0f} ops/s), {r.fault_windows} fault window(s), "
        f"{s.crashes} app crash(es); wall {r.wall_s:.1f} s"
    )
    console.print(f"  run folder: {r.run_dir}")
    if r.stack is not None:
        from driftlab.harness.lab.runner.stack_use import stack_line

        console.print(f"  {escape(stack_line(r.stack))}", soft_wrap=True)
    if r.analysis_note:
        console.print(f"  [yellow]analysis:[/] {escape(r.analysis_note)}")
    for e in r.fault_errors:
        # The first line names the problem; a service's log tail follows in runner.log.
        console.print(f"  [yellow]fault problem:[/] {escape(e.strip().splitlines()[0])}")
    if r.inconclusive:
        console.print("  [yellow]inconclusive[/], the run did not test its claim; missing:")
        for why in r.inconclusive:
            console.print(f"    - {why}")
    elif r.verdict == LAB_FAILED:
        console.print("  [yellow]lab failed[/], not the system under test:")
        # The runner's own watchdog line when the run stopped before any analysis.
        for why in r.reasons or [r.error or "see the run's logs/runner.log"]:
            console.print(f"    - {escape(why)}")
    elif r.error:
        # Escaped: an error may quote a pipeline file's [stores.<name>], not markup.
        console.print(f"  [red]error:[/] {escape(r.error)} (see {r.run_dir.runner_log})")
    if r.analysis_interrupted:
        console.print(
            "  [yellow]interrupted[/] during the analysis; the history is complete: "
            f"`driftlab analyze {r.run_dir}` judges it"
        )
    elif r.interrupted:
        console.print(
            "  [yellow]interrupted:[/] faults healed, history closed without its end mark; "
            f"`driftlab analyze {r.run_dir}` still reads it"
        )
    if r.verdict == LAB_FAILED:
        console.print("  verdict: [red]lab failed[/] (the system under test was not judged)")
    elif r.verdict is not None:
        word = verdict_word(r)
        colour = {"reproduced": "green", "held": "green", "unexpected anomaly": "red"}.get(
            word or "", "yellow"
        )
        counts = (
            ", ".join(
                f"{k} {v:,}" + (f" in {r.coverage[k]:,} chances" if k in r.coverage else "")
                for k, v in sorted(r.counts.items())
            )
            # Judged on its facts alone (--no-analyze): the checkers counted nothing.
            or ("no anomalies" if r.analysed_on else "not counted: the history was not analysed")
        )
        console.print(f"  anomalies: {counts}")
        for line in lost_where_lines(r.lost_where):
            console.print(f"  {line}")
        console.print(f"  verdict: [{colour}]{word}[/]")
        print_caveats(console, r.caveats, "  ")
