"""The one analyse-judge-report sequence of a recorded run: the Spark analysis, the
inconclusive check, the verdict and its exit code, then report.html."""

from __future__ import annotations

import logging
import time

from harness import exitcodes
from harness.rundir import RunDir
from harness.runner import inconclusive
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
    result.inconclusive = inconclusive.apply(run_dir, analysis)
    result.verdict = analysis.get("verdict")
    result.counts = {k: v for k, v in analysis.get("counts", {}).items() if v}
    result.lost_where = analysis.get("lost_where") or {}
    if result.inconclusive:
        # An error too: the matrix, the suite and the plugin count it as a failed run.
        result.error = "inconclusive: " + "; ".join(result.inconclusive)
        result.exit_code = exitcodes.LAB_FAILED
    elif result.verdict in ("reproduced", "no expectations"):
        result.exit_code = exitcodes.OK
    else:
        result.exit_code = exitcodes.VERDICT


def write_report(run_dir: RunDir) -> None:
    """RUN_DIR/report.html from the analysis outputs; a report that fails to render
    is logged, never a failed run (`driftlab report RUN_DIR` renders it again)."""
    try:
        from reports.run_report import render_run_report

        render_run_report(run_dir)
    except Exception:
        log.exception("the HTML report of %s failed; retry with driftlab report", run_dir)
