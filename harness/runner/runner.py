"""One run of one scenario, from a fresh run directory to a verdict.

    run folder + config.json -> recorder -> stack (reused or started) -> setup prepared
    under a fresh namespace -> workload and nemesis concurrently -> heal -> quiesce ->
    final reads of every store as `state` events -> END mark -> analysis -> verdict

SIGINT and SIGTERM stop the workload and the nemesis, heal every fault and close the
history (without its END mark: the run was cut short); a second signal stops waiting.
A SIGKILL leaves a history cut short but readable (the recorder is durable).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import exitcodes
from harness.exitcodes import BadInput
from harness.history.recorder import Recorder
from harness.history.schema import Mark, RunHeader
from harness.nemesis import Nemesis
from harness.rundir import RunDir
from harness.runner import inconclusive
from harness.runner.clean_stack import clean, run_lease
from harness.runner.stack_use import acquire_stack, service_logs
from harness.services.stack import Stack
from harness.setups import SETUPS
from harness.setups.base import SetupContext, namespace_for
from harness.workload import Workload, WorkloadStats
from reports.versions import component_versions
from scenarios.model import Scenario

log = logging.getLogger("driftlab.runner")

EXIT_OK = exitcodes.OK  # reproduced, or no expectations
EXIT_VERDICT = exitcodes.VERDICT  # not reproduced, or an unexpected (forbidden) anomaly
EXIT_BAD_INPUT = exitcodes.BAD_INPUT  # the scenario's parameters cannot be used
EXIT_LAB_FAILED = exitcodes.LAB_FAILED  # the lab failed: services, disk, Spark
EXIT_INTERRUPTED = exitcodes.INTERRUPTED

Tick = Callable[[str, float, WorkloadStats], None]
"""`tick(phase, elapsed_s, stats)`: progress for the terminal."""


@dataclass
class RunResult:
    """What a run produced: where, what verdict, and its figures."""

    run_dir: Path
    scenario: str
    seed: int
    verdict: str | None = None
    exit_code: int = EXIT_OK
    stats: WorkloadStats = field(default_factory=WorkloadStats)
    interrupted: bool = False
    analysis_interrupted: bool = False  # during the analysis: the history is complete
    quiesced: bool = False
    fault_windows: int = 0
    fault_errors: list[str] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)  # why the verdict proves nothing
    counts: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    analysis_s: float = 0.0
    error: str | None = None


class _Signals:
    """SIGINT/SIGTERM set `stop`; a second one raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.stop.is_set():
            raise KeyboardInterrupt
        self.signum = signum
        self.stop.set()

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Signals]:
        if threading.current_thread() is not threading.main_thread():
            yield self  # signals only reach the main thread; the caller stops us otherwise
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        try:
            yield self
        finally:
            for sig, old in self._old.items():
                signal.signal(sig, old)


@contextlib.contextmanager
def _run_log(run_dir: RunDir) -> Iterator[None]:
    """Send the harness's log records to logs/runner.log for the run's duration."""
    handler = logging.FileHandler(run_dir.runner_log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("driftlab")
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()


def run_scenario(
    scenario: Scenario,
    *,
    seed: int,
    runs_dir: Path,
    spark_master: str | None = None,
    stack: Any = None,
    analyze: bool = True,
    tick: Tick | None = None,
    stop: threading.Event | None = None,
) -> RunResult:
    """Run `scenario` once and judge it; never raises for a failed run, see `exit_code`.

    `stack` is a running stack to use (the suite shares one); None reuses a stack
    started by `driftlab up` or starts one for this run and stops it afterwards.
    `stop` lets a caller outside the main thread cut the run short.
    """
    scenario.validate()
    started = time.monotonic()
    run_dir = RunDir.create(runs_dir, scenario.name, seed)
    run_id = run_dir.run_id
    params = scenario.to_config()
    run_dir.write_config(
        {
            "scenario": scenario.name,
            "seed": seed,
            "run_id": run_id,
            "claim": scenario.claim,
            "params": params,
            "expectations": dict(scenario.expectations),
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "versions": component_versions(SETUPS[scenario.setup].services),
        },
    )
    result = RunResult(run_dir.path, scenario.name, seed)
    signals = _Signals()
    if stop is not None:
        signals.stop = stop
    with _run_log(run_dir):
        with signals.installed():
            log.info("run %s: scenario %s seed %d", run_id, scenario.name, seed)
            rec = Recorder(run_dir, RunHeader(run_id, scenario.name, seed, params=params))
            try:
                _execute(scenario, seed, run_dir, rec, stack, signals, result, tick)
                # A signal during the quiesce or the final reads also cuts the run short.
                result.interrupted = result.interrupted or signals.stop.is_set()
            except KeyboardInterrupt:
                result.interrupted = True
            except Exception as exc:
                log.exception("run %s failed", run_id)
                result.exit_code, result.error = _failure(exc)
            finally:
                if result.interrupted or result.error or rec.failure:
                    rec.close()  # no END mark: readers see a history cut short
                else:
                    rec.end()
            if rec.failure is not None and not result.interrupted:
                log.error("recording the history failed: %s", rec.failure)
                result.exit_code = EXIT_LAB_FAILED
                problem = exitcodes.os_problem(rec.failure) or str(rec.failure)
                result.error = (
                    f"the history stops early: {problem}; what was recorded is readable "
                    f"(`driftlab analyze {run_dir}` once there is room)"
                )
        if result.interrupted:
            result.exit_code = EXIT_INTERRUPTED
        elif result.error is None and analyze:
            _analyze(run_dir, spark_master, result, tick)
    result.wall_s = time.monotonic() - started
    try:
        _write_summary(run_dir, result)
    except OSError:
        log.exception("logs/run.json of %s not written", run_dir)  # a full disk: say the rest
    if result.verdict is not None:
        _write_report(run_dir)
    return result


def _execute(
    scenario: Scenario,
    seed: int,
    run_dir: RunDir,
    rec: Recorder,
    stack: Any,
    signals: _Signals,
    result: RunResult,
    tick: Tick | None,
) -> None:
    setup = SETUPS[scenario.setup]()
    if tick:
        tick("stack", 0.0, result.stats)
    with (
        acquire_stack(setup.services, stack) as live_stack,
        service_logs(live_stack, setup.services, run_dir.logs),
        contextlib.ExitStack() as scope,
    ):
        ctx = SetupContext(
            namespace=namespace_for(scenario.name),
            stack=live_stack,
            recorder=rec,
            work_dir=run_dir.path,
            params=dict(scenario.setup_params),
            seed=seed,
        )
        log.info("namespace %s", ctx.namespace)
        if isinstance(live_stack, Stack):
            for line in clean(live_stack).lines():
                log.warning("stack: removed %s", line)
            log.info("stack: every link healed and free of toxics, no leftovers")
            scope.enter_context(run_lease(live_stack, ctx.namespace))
        try:
            setup.prepare(ctx)
        except ValueError as exc:
            # Setups check their parameters here: the scenario's input, not the lab.
            raise BadInput(str(exc)) from exc
        # Torn down however the run ends: a run whose consumers failed to start once
        # left its connector and replication slot behind.
        scope.callback(setup.teardown)
        workload = Workload(scenario.workload, setup, seed)
        nemesis = Nemesis(scenario.faults, setup, ctx)
        try:
            setup.start()
            nemesis.start()
            workload.start()
            t0 = time.monotonic()
            while workload.alive():
                if signals.stop.wait(0.25):
                    result.interrupted = True
                    workload.stop()
                    break
                if rec.failure is not None:
                    workload.stop()  # the history cannot grow: the rest would be unjudged
                    break
                if tick:
                    tick("workload", time.monotonic() - t0, workload.stats)
            result.stats = workload.join(timeout=60)
            rec.mark(Mark.WORKLOAD_DONE)
        finally:
            # Heal even when the run failed: no fault may outlive its run.
            nemesis.heal_all()
            rec.mark(Mark.HEALED)
            result.fault_windows = nemesis.windows
            result.fault_errors = nemesis.errors
        if not result.interrupted:
            if tick:
                tick("quiesce", 0.0, result.stats)
            result.quiesced = setup.quiesce(scenario.quiesce_timeout)
            if result.quiesced:
                rec.mark(Mark.QUIESCED)
            else:
                log.warning("not quiesced within %.0f s", scenario.quiesce_timeout)
            for store, items in setup.final_states().items():
                for key, (value, version) in sorted(items.items()):
                    rec.state(store, key, value, version=version)


def _analyze(run_dir: RunDir, master: str | None, result: RunResult, tick: Tick | None) -> None:
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
            analysis = analyze(run_dir.path, master=master).analysis
    except KeyboardInterrupt:
        log.info("analysis of %s interrupted; the history is intact", run_dir)
        result.interrupted = result.analysis_interrupted = True
        result.exit_code = EXIT_INTERRUPTED
        return
    except Exception as exc:
        log.exception("analysis of %s failed", run_dir)
        code, message = _failure(exc)
        result.exit_code, result.error = code, f"analysis failed: {message}"
        return
    finally:
        result.analysis_s = time.monotonic() - t
    result.inconclusive = inconclusive.apply(run_dir, analysis)
    result.verdict = analysis.get("verdict")
    result.counts = {k: v for k, v in analysis.get("counts", {}).items() if v}
    if result.inconclusive:
        # An error too: the matrix, the suite and the plugin count it as a failed run.
        result.error = "inconclusive: " + "; ".join(result.inconclusive)
        result.exit_code = EXIT_LAB_FAILED
    elif result.verdict in ("reproduced", "no expectations"):
        result.exit_code = EXIT_OK
    else:
        result.exit_code = EXIT_VERDICT


def _failure(exc: Exception) -> tuple[int, str]:
    """The exit code and one line for a run that could not complete: bad input (a
    setup's parameter) exits 2, anything else is the lab failing (3)."""
    described = exitcodes.describe(exc)
    if described is not None:
        return described
    if isinstance(exc, ValueError):
        # Setups validate their parameters in prepare() and raise ValueError.
        return EXIT_BAD_INPUT, str(exc).strip()[:300]
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return EXIT_LAB_FAILED, f"{type(exc).__name__}: {first}"


def _write_report(run_dir: RunDir) -> None:
    """RUN_DIR/report.html from the analysis outputs; a report that fails to render
    is logged, never a failed run (`driftlab report RUN_DIR` renders it again)."""
    try:
        from reports.run_report import render_run_report

        render_run_report(run_dir.path)
    except Exception:
        log.exception("the HTML report of %s failed; retry with driftlab report", run_dir)


def _write_summary(run_dir: RunDir, result: RunResult) -> None:
    """logs/run.json: the runner's own figures (ops, rate, timings) for reports."""
    s = result.stats
    summary = {
        "run_id": str(uuid.uuid5(uuid.NAMESPACE_URL, str(run_dir.path))),
        "verdict": result.verdict,
        "exit_code": result.exit_code,
        "interrupted": result.interrupted,
        "quiesced": result.quiesced,
        "error": result.error,
        "ops": s.ops,
        "ops_per_s": round(s.rate, 1),
        "by_op": s.by_op,
        "app_crashes": s.crashes,
        "client_errors": s.errors,
        "fault_windows": result.fault_windows,
        "fault_errors": result.fault_errors,
        "inconclusive": result.inconclusive,
        "wall_s": round(result.wall_s, 2),
        "analysis_s": round(result.analysis_s, 2),
    }
    run_dir.summary.write_text(json.dumps(summary, indent=2) + "\n")
