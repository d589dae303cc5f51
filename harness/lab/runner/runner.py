"""One run of one scenario, from a fresh run directory to a verdict.

    run folder -> lifecycle.execute with the WorkloadDriver (workload and nemesis
    concurrently) -> the judge it was handed (analysis and its verdict,
    driftlab.checkers.verdict) -> logs/run.json

The runner receives the setup it runs and the judge; driftlab.harness.app.run looks the setup up
and renders the report.

SIGINT and SIGTERM during the workload stop it and the nemesis, heal every fault and
close the history (without its END mark: the run was cut short); a second signal stops
waiting. In any other phase one signal stops the run at once (driftlab.harness.lab.runner.signals).
Either way logs/run.json says `interrupted` and in which phase, exit 130. A SIGKILL
leaves a history cut short but readable (the recorder is durable).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftlab.checkers.verdict import LAB_FAILED
from driftlab.harness.history import exitcodes
from driftlab.harness.history.rundir import Findings, RunDir, RunSummary
from driftlab.harness.lab.runner.lifecycle import RunPlan, execute, run_log
from driftlab.harness.lab.runner.signals import RunSignals
from driftlab.harness.lab.runner.watchdog import LabBreakdown, failure_line
from driftlab.harness.lab.runner.workload_driver import Tick, WorkloadDriver
from driftlab.harness.lab.scenario import Scenario
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.harness.lab.setups.base import Setup
from driftlab.harness.lab.workload import WorkloadStats

log = logging.getLogger("driftlab.runner")


@dataclass
class RunResult:
    """What a run produced: where, what verdict, and its figures."""

    run_dir: RunDir
    scenario: str
    seed: int
    verdict: str | None = None
    exit_code: int = exitcodes.OK
    stats: WorkloadStats = field(default_factory=WorkloadStats)
    interrupted: bool = False
    analysis_interrupted: bool = False  # during the analysis: the history is complete
    interrupted_in: str | None = None  # the phase (driftlab.harness.lab.runner.signals.PHASES)
    quiesced: bool = False
    fault_windows: int = 0
    fault_errors: list[str] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)  # why the verdict proves nothing
    lab_failures: list[dict[str, Any]] = field(default_factory=list)  # the watchdog's
    reasons: list[str] = field(default_factory=list)  # why inconclusive or the lab failed
    caveats: list[str] = field(default_factory=list)  # what does not change the verdict
    coverage: dict[str, int] = field(default_factory=dict)  # chances per kind
    expectations: dict[str, str] = field(default_factory=dict)  # analysis.json's
    counts: dict[str, int] = field(default_factory=dict)
    lost_where: dict[str, dict[str, int]] = field(default_factory=dict)  # analysis.json's
    wall_s: float = 0.0
    analysis_s: float = 0.0
    analysed_on: str | None = None  # "server" (the stack's warm Spark) or "process"
    analysis_note: str | None = None  # why the warm server was given up for this one
    error: str | None = None
    discarded: bool = False  # bad input found before the workload: no run folder kept
    stack: dict[str, Any] | None = None  # which stack it used (stack_use.stack_used)
    setup: Setup | None = field(default=None, repr=False)  # the one the run was made on
    findings: Findings = field(default_factory=Findings)  # the setup's, for the verdict


Judge = Callable[[RunDir, RunResult], None]
"""What judges a completed run in place: fills the result's verdict (driftlab.harness.app.judge)."""


def record_run(
    scenario: Scenario,
    setup: Setup,
    *,
    seed: int,
    runs_dir: Path,
    stack: ServiceStack | None = None,
    judge: Judge | None = None,
    tick: Tick | None = None,
    stop: threading.Event | None = None,
) -> RunResult:
    """Run `scenario` once on `setup`, hand the run to `judge` when it completed, write
    logs/run.json; never raises for a failed run, see `exit_code`.

    `stack` is a running stack to use (the suite shares one); None reuses a stack
    started by `driftlab up` or starts one for this run and stops it afterwards.
    `stop` lets a caller outside the main thread cut the run short.
    """
    started = time.monotonic()
    run_dir = RunDir.create(runs_dir, scenario.name, seed)
    driver = WorkloadDriver(scenario, setup, seed, tick)
    plan = RunPlan(
        scenario=scenario.name,
        seed=seed,
        params=scenario.to_config(),
        setup_params=dict(scenario.setup_params),
        config={
            "claim": scenario.claim,
            "expectations": dict(scenario.expectations),
            "min_chances": dict(scenario.min_chances),
        },
        quiesce_timeout=scenario.quiesce_timeout,
    )
    result = RunResult(run_dir, scenario.name, seed, setup=setup)
    signals = RunSignals(stop)

    def on_phase(phase: str) -> None:
        signals.enter(phase)
        if tick:
            tick(phase, 0.0, driver.stats)

    with run_log(run_dir), signals.installed():
        log.info("run %s: scenario %s seed %d", run_dir.run_id, scenario.name, seed)
        ex = execute(
            run_dir, setup, driver, plan, stack=stack, stop=signals.stop, on_phase=on_phase
        )
        result.interrupted, result.quiesced = ex.interrupted, ex.quiesced
        result.stack = ex.stack
        result.stats = driver.stats
        result.fault_windows, result.fault_errors = driver.fault_windows, driver.fault_errors
        result.findings = setup.findings()
        if ex.error is not None:
            result.exit_code, result.error = failure(ex.error)
        # A mistake in the input found before the workload (a pipeline file's reader,
        # statement or command): no run happened, so no run folder is kept.
        result.discarded = result.exit_code == exitcodes.BAD_INPUT and not driver.stats.ops
        if ex.lab_failures:
            _lab_failed(result, [b.to_json() for b in ex.lab_failures])
        if ex.recorder_failure is not None and not result.interrupted:
            log.error("recording the history failed: %s", ex.recorder_failure)
            result.exit_code = exitcodes.LAB_FAILED
            problem = exitcodes.os_problem(ex.recorder_failure) or str(ex.recorder_failure)
            result.error = (
                f"the history stops early: {problem}; what was recorded is readable "
                f"(`driftlab analyze {run_dir}` once there is room)"
            )
        if result.interrupted:
            result.exit_code = exitcodes.INTERRUPTED
            result.discarded = False
        elif result.error is None and judge is not None:
            signals.enter("analyze")
            try:
                # The verdict reads the run's facts (its lab failures, its setup's
                # findings) from logs/run.json, wherever the analysis runs; no exit
                # code in it until the verdict gives one.
                with contextlib.suppress(OSError):
                    write_summary(run_dir, result, judged=False)
                judge(run_dir, result)
            except KeyboardInterrupt:
                result.interrupted = result.analysis_interrupted = True
                result.exit_code = exitcodes.INTERRUPTED
        if result.interrupted:
            result.interrupted_in = signals.interrupted_in or signals.phase
            log.info("interrupted during the %s", result.interrupted_in)
        signals.enter("report")
        result.wall_s = time.monotonic() - started
        if result.discarded:
            run_dir.discard()
            return result
        try:
            write_summary(run_dir, result)
        except OSError:
            log.exception("logs/run.json of %s not written", run_dir)  # a full disk
        except KeyboardInterrupt:
            note_interrupted(result, "report")
    return result


def _lab_failed(result: RunResult, failures: list[dict[str, Any]]) -> None:
    """The lab failed under the run (run.json's `lab_failures`): exit 3 and the verdict
    `lab failed`, whatever the history shows. The analysis is skipped: the verdict
    (driftlab.checkers.verdict.decide) would say the same from run.json."""
    result.lab_failures = failures
    result.verdict = LAB_FAILED
    result.exit_code = exitcodes.LAB_FAILED
    result.error = failure_line([LabBreakdown.from_json(f) for f in failures])


def failure(exc: Exception) -> tuple[int, str]:
    """The exit code and one line for a run or an analysis that could not complete: bad
    input (a setup's parameter) exits 2, anything else is the lab failing (3)."""
    described = exitcodes.describe(exc)
    if described is not None:
        return described
    if isinstance(exc, ValueError):
        # Setups validate their parameters in prepare() and raise ValueError.
        return exitcodes.BAD_INPUT, str(exc).strip()[:300]
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    # pika's connection errors carry no message: say at least what kind of error it was.
    return exitcodes.LAB_FAILED, f"{type(exc).__name__}: {first or 'no message (see runner.log)'}"


def write_summary(run_dir: RunDir, result: RunResult, *, judged: bool = True) -> None:
    """logs/run.json (driftlab.harness.history.rundir.RunSummary): the runner's own figures (ops,
    rate,
    timings) and the setup's findings; before the run is `judged`, with no exit code."""
    s = result.stats
    RunSummary(
        run_id=str(uuid.uuid5(uuid.NAMESPACE_URL, str(run_dir.path))),
        verdict=result.verdict,
        exit_code=result.exit_code if judged else None,
        interrupted=result.interrupted,
        interrupted_in=result.interrupted_in,
        quiesced=result.quiesced,
        error=result.error,
        ops=s.ops,
        ops_per_s=round(s.rate, 1),
        workload_s=round(s.elapsed, 2),
        by_op=s.by_op,
        app_crashes=s.crashes,
        client_errors=s.errors,
        fault_windows=result.fault_windows,
        fault_errors=result.fault_errors,
        inconclusive=result.inconclusive,
        lab_failures=result.lab_failures,
        not_converged=result.findings.not_converged,
        not_back=result.findings.not_back,
        unreadable_stores=result.findings.unreadable,
        wall_s=round(result.wall_s, 2),
        analysis_s=round(result.analysis_s, 2),
        analysed_on=result.analysed_on,
        stack=result.stack,
    ).write(run_dir.summary)


def note_interrupted(result: RunResult, phase: str) -> None:
    """The run was interrupted in `phase` (unless an earlier signal already interrupted
    it) after record_run wrote logs/run.json: the result and logs/run.json say so,
    whatever else the file holds."""
    phase = result.interrupted_in or phase
    result.interrupted, result.interrupted_in = True, phase
    result.exit_code = exitcodes.INTERRUPTED
    with contextlib.suppress(OSError):
        summary = RunSummary.read(result.run_dir.summary)
        if summary is not None:
            summary.exit_code, summary.interrupted = result.exit_code, True
            summary.interrupted_in = phase
            summary.write(result.run_dir.summary)
