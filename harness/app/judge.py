"""The one analyse-judge-report sequence of a recorded run: the Spark analysis and its
verdict (checkers.verdict.decide, called once inside it), the exit code, then
report.html."""

from __future__ import annotations

import logging
import time

from checkers.verdict import EXIT_CODES, INCONCLUSIVE
from harness import exitcodes
from harness.rundir import RunDir
from harness.runner.runner import RunResult, failure
from harness.runner.workload_driver import Tick

log = logging.getLogger("driftlab.runner")


def judge_run(
    run_dir: RunDir, result: RunResult, *, master: str | None = None, tick: Tick | None = None
) -> None:
    """Analyse the completed run in `run_dir` and fill `result`'s verdict, counts and
    exit code; an interrupted or failed analysis says so in `result`, never raises."""
    if tick:
        tick("analyze", 0.0, result.stats)
    t = time.monotonic()
    try:
        from checkers.analyze import analyze
    except ImportError:
        log.warning("checkers.analyze is not available: the run is recorded, not judged")
        result.verdict = None
        return
    from checkers.session import interruptible

    try:
        with interruptible():
            analysis = analyze(run_dir, master=master).analysis
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
    result.verdict = analysis.get("verdict")
    result.counts = {k: v for k, v in analysis.get("counts", {}).items() if v}
    result.lost_where = analysis.get("lost_where") or {}
    result.exit_code = EXIT_CODES.get(result.verdict or "", exitcodes.LAB_FAILED)
    result.coverage = analysis.get("coverage") or {}
    result.expectations = analysis.get("expectations") or {}
    result.reasons = analysis.get("reasons") or []
    if result.verdict == INCONCLUSIVE:
        result.inconclusive = result.reasons
    if result.reasons and result.exit_code == exitcodes.LAB_FAILED:
        # An error too: the matrix, the suite and the plugin count it as a failed run.
        result.error = f"{result.verdict}: " + "; ".join(result.reasons)


def write_report(run_dir: RunDir) -> None:
    """RUN_DIR/report.html from the analysis outputs; a report that fails to render
    is logged, never a failed run (`driftlab report RUN_DIR` renders it again)."""
    try:
        from reports.run_report import render_run_report

        render_run_report(run_dir)
    except Exception:
        log.exception("the HTML report of %s failed; retry with driftlab report", run_dir)
