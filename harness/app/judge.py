"""The one analyse-judge-report sequence of a recorded run: the Spark analysis and its
verdict (driftlab.checkers.verdict.decide, called once inside it), the exit code, then
report.html; for a run just recorded (`judge_run`; `judge_facts` without the
analysis), one analysed on request (`analyze_recorded`, `driftlab analyze`) or a
replay (driftlab.harness.app.replay)."""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from driftlab.checkers.analysis_files import Analysis
from driftlab.checkers.outputs import EXAMPLES_PER_KIND
from driftlab.checkers.run_facts import summary_facts
from driftlab.checkers.verdict import EXIT_CODES, INCONCLUSIVE, NO_EXPECTATIONS, UNEXPECTED, decide
from driftlab.harness.history import exitcodes
from driftlab.harness.history.rundir import RunDir, RunsDir
from driftlab.harness.lab.runner.runner import RunResult, failure
from driftlab.harness.lab.runner.workload_driver import Tick

if TYPE_CHECKING:
    from rich.console import Console

    from driftlab.checkers.analyze import AnalysisResult
    from driftlab.harness.lab.services.base import Endpoint
    from driftlab.harness.lab.services.stack_protocol import ServiceStack

log = logging.getLogger("driftlab.runner")


@dataclass
class WarmSpark:
    """The analysis server of the stack the runs use (the `analysis` service of
    `driftlab up`), and why it was given up, if it was: later runs then analyse in
    process without trying it again."""

    endpoint: Endpoint
    gone: str | None = None


ON_SERVER = "analyze-warm"
"""The tick's phase while the warm server analyses (`analyze`: Spark in this process)."""


def judge_run(
    run_dir: RunDir,
    result: RunResult,
    *,
    master: str | None = None,
    server: WarmSpark | None = None,
    tick: Tick | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Analyse the completed run in `run_dir` and fill `result`'s verdict, counts and
    exit code; an interrupted or failed analysis says so in `result`, never raises.

    On the warm `server` when one is given and not gone, else in this process; a
    server that cannot be reached or stops answering is given up with one line
    (`result.analysis_note`, runner.log) and the run analysed in process, so the
    verdict never waits on it. `stop` set cuts a server's analysis short (the matrix's
    deadline; in process, the Spark session is stopped instead)."""
    t = time.monotonic()
    try:
        analysis = _analysis(run_dir, result, master, server, tick, stop)
    except KeyboardInterrupt:
        log.info("analysis of %s interrupted; the history is intact", run_dir)
        result.interrupted = result.analysis_interrupted = True
        result.exit_code = exitcodes.INTERRUPTED
        return
    except Exception as exc:
        log.exception("analysis of %s failed", run_dir)
        code, message = failure(exc)
        result.exit_code, result.error = code, f"analysis failed: {message}"
        return
    finally:
        result.analysis_s = time.monotonic() - t
    if analysis is None:
        result.verdict = None
        return
    result.counts = {k: v for k, v in analysis.counts.items() if v}
    result.lost_where = dict(analysis.lost_where)
    result.coverage = dict(analysis.coverage)
    result.expectations = dict(analysis.expectations)
    result.caveats = list(analysis.caveats)
    _take(result, analysis.verdict, list(analysis.reasons))


def judge_facts(run_dir: RunDir, result: RunResult) -> None:
    """Judge a run not analysed (`driftlab run --no-analyze`) on its facts alone
    (logs/run.json: what its setup found, driftlab.checkers.run_facts), through the same
    `decide`: a store that did not converge still fails it, a store that could not be
    read still makes it inconclusive. A run whose facts say nothing stays not judged."""
    found = decide({}, {}, {}, summary_facts(run_dir))
    if found.verdict != NO_EXPECTATIONS:
        _take(result, found.verdict, found.reasons)


def _take(result: RunResult, verdict: str | None, reasons: list[str]) -> None:
    """`result` takes the verdict, its exit code and its reasons."""
    result.verdict, result.reasons = verdict, reasons
    result.exit_code = EXIT_CODES.get(verdict or "", exitcodes.LAB_FAILED)
    if verdict == INCONCLUSIVE:
        result.inconclusive = reasons
    if reasons and result.exit_code == exitcodes.LAB_FAILED:
        # An error too: the matrix, the suite and the plugin count it as a failed run.
        result.error = f"{verdict}: " + "; ".join(reasons)
    elif reasons:
        # The system under test failed outside the counts: its reasons name themselves
        # ("not converged: store cache: ..."), and the report shows them as the error.
        result.error = "; ".join(reasons)


def _analysis(
    run_dir: RunDir,
    result: RunResult,
    master: str | None,
    server: WarmSpark | None,
    tick: Tick | None,
    stop: threading.Event | None,
) -> Analysis | None:
    """analysis.json of the run: on the warm server while it serves, else in process;
    None when this installation cannot analyse."""
    if server is not None and server.gone is None:
        from driftlab.harness.lab.services.analysis import ServerUnavailable, analysis_on_server

        if tick:
            tick(ON_SERVER, 0.0, result.stats)
        try:
            analysis = analysis_on_server(
                server.endpoint, run_dir.path, EXAMPLES_PER_KIND, stop=stop
            )
        except ServerUnavailable as exc:
            server.gone = str(exc)
            result.analysis_note = f"{exc}: analysed in this process"
            log.warning("%s", result.analysis_note)
        else:
            result.analysed_on = "server"
            log.info("analysed on the warm Spark of the stack")
            return analysis
    if tick:
        tick("analyze", 0.0, result.stats)
    try:
        from driftlab.checkers.analyze import analyze
    except ImportError:
        log.warning("driftlab.checkers.analyze is not available: the run is recorded, not judged")
        return None
    from driftlab.checkers.session import interruptible

    with interruptible():
        analysis = analyze(run_dir, master=master).analysis
    result.analysed_on = "process"
    return analysis


def write_report(run_dir: RunDir) -> None:
    """RUN_DIR/report.html from the analysis outputs; a report that fails to render
    is logged, never a failed run (`driftlab report RUN_DIR` renders it again)."""
    try:
        from driftlab.reports.run_report import render_run_report

        render_run_report(run_dir)
    except Exception:
        log.exception("the HTML report of %s failed; retry with driftlab report", run_dir)


@dataclass
class Analysed:
    """A recorded run analysed on request (`driftlab analyze`): the analysis, the exit
    status it gives, and its report when one was asked for."""

    result: AnalysisResult
    exit_code: int
    report: Path | None = None
    report_error: str | None = None  # why the report asked for was not written


def analyze_recorded(
    run_dir: RunDir,
    *,
    spark_master: str | None = None,
    console: Console,
    server: Endpoint | None = None,
    report: bool = False,
) -> Analysed:
    """Analyse the history in `run_dir` and judge it, on the warm analysis `server`
    when one is given (in this process when it does not answer, with one line), else in
    this process; the checkers' progress lines go to
    `console`. With `report`, RUN_DIR/report.html follows. Raises what the analysis
    raised (`analysis_failure` tells it in one line); Ctrl-C stops it at once."""
    from driftlab.checkers.analyze import analyze
    from driftlab.checkers.session import interruptible
    from driftlab.harness.lab.services.analysis import ServerUnavailable, analyze_remotely

    with interruptible():
        result = None
        if server is not None:
            try:
                result = analyze_remotely(server, run_dir.path, console, EXAMPLES_PER_KIND)
            except ServerUnavailable as exc:
                console.print(f"[yellow]{escape(str(exc))}[/]: analysing in this process")
        if result is None:
            result = analyze(run_dir, spark_master, console=console)
    out = Analysed(result, analysis_exit_code(result.verdict))
    if report:
        from driftlab.reports.render import ReportError
        from driftlab.reports.run_report import render_run_report

        try:
            out.report = Path(render_run_report(run_dir))
        except ReportError as exc:
            out.report_error = str(exc)
    return out


def analysis_exit_code(verdict: str) -> int:
    """The exit status of `driftlab analyze` for `verdict`: 1 for a forbidden anomaly
    only (a prediction not reproduced is a result of the analysis, not a failure of
    it), 3 for an inconclusive run or a lab failure, else 0."""
    code = EXIT_CODES.get(verdict, exitcodes.LAB_FAILED)
    if code == exitcodes.VERDICT and verdict != UNEXPECTED:
        return exitcodes.OK
    return code


def analysis_failure(exc: Exception, run_dir: RunDir) -> tuple[int, str]:
    """The exit code and one line for an analysis that failed: 2 for a history or
    config.json that cannot be read; else the traceback goes to RUN_DIR/logs/analyze.log
    (when it can be written) for the detail."""
    from driftlab.checkers.analyze import AnalysisInputError

    if isinstance(exc, AnalysisInputError):
        return exitcodes.BAD_INPUT, str(exc)
    described = exitcodes.describe(exc)
    if described is not None:
        return described
    log_path = run_dir.analyze_log
    try:
        with log_path.open("a") as log_file:
            log_file.write("".join(traceback.format_exception(exc)))
        where = f"; the detail is in {log_path}"
    except OSError:
        where = ""
    text = str(exc)
    first = text.strip().splitlines()[0][:200] if text.strip() else type(exc).__name__
    return exitcodes.LAB_FAILED, f"the analysis failed ({first}){where}"


def warm_analysis_server(stack: ServiceStack | None = None) -> Endpoint | None:
    """The analysis server of `stack` (by default the stack `driftlab up` left running
    here), when it answers a ping now and no other Spark master is asked for
    (DRIFTLAB_SPARK_MASTER)."""
    if os.environ.get("DRIFTLAB_SPARK_MASTER"):
        return None
    from driftlab.harness.lab.services.analysis import ANALYSIS

    if stack is None:
        from driftlab.harness.lab.runner.stack_use import running_stack

        try:
            stack = running_stack()
        except Exception:  # a stack folder that cannot be read: analyse in process
            return None
    service = stack.services.get(ANALYSIS) if stack is not None else None
    if service is None or not service.healthy():
        return None
    return service.endpoint()


def warm_spark(stack: ServiceStack | None, master: str | None) -> WarmSpark | None:
    """The warm server the runs on `stack` (None: the running `driftlab up` stack they
    will use, if any) analyse on, unless `master` names a Spark master of its own."""
    if master is not None:
        return None
    endpoint = warm_analysis_server(stack)
    return WarmSpark(endpoint) if endpoint is not None else None


def judging_spark(
    stack: ServiceStack | None, master: str | None, runs_dir: Path, *, reuse: bool = True
) -> WarmSpark | None:
    """The warm server of `warm_spark` (asked only when `reuse`) that the runs are
    judged on; without one, this process's Spark starts now in the background (its log
    in `runs_dir`), so that it is warm by the time the first run is analysed."""
    server = warm_spark(stack, master) if reuse else None
    if server is None:
        from driftlab.checkers.spark_start import warm_up

        warm_up(master, RunsDir(runs_dir).spark_log)
    return server
