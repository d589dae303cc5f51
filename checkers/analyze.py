"""Analyse a run: the keyed pass over its history, and the files of docs/analysis.md.

`analyze(run_dir)` converts the history to Parquet (driftlab.harness.history.reader), then one
Spark job (driftlab.checkers.keyed.spark) runs every check, makes every series, adds its rows
up (driftlab.checkers.figures) and writes the sorted anomalies into a scratch folder;
analysis.json, anomalies.parquet, examples.json and series.json follow from it,
whatever the history. Only aggregates and a few sampled rows reach the driver.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark.logger import PySparkLogger
from rich.console import Console

from driftlab.checkers.analysis_files import (
    ANALYSIS_SCHEMA,
    Analysis,
    CheckerStatus,
    Examples,
    HistoryBlock,
    RealtimeLagBlock,
    RunBlock,
    SparkInfo,
    Timings,
    WorstPoll,
    validated,
    write_output,
)
from driftlab.checkers.anomaly import ALL_KINDS, KINDS
from driftlab.checkers.figures import PassFigures
from driftlab.checkers.keyed.columns import REALTIME_SERIES
from driftlab.checkers.keyed.spark import keyed_pass
from driftlab.checkers.outputs import EXAMPLES_PER_KIND, examples
from driftlab.checkers.reference.reorder import RealtimeLag, worst_realtime_lag
from driftlab.checkers.run_facts import run_facts
from driftlab.checkers.series import bucket_seconds
from driftlab.checkers.spark_start import start_spark
from driftlab.checkers.verdict import (
    INCONCLUSIVE,
    LAB_FAILED,
    ExpectationError,
    RunFacts,
    check_expectations,
    check_min_chances,
    decide,
)
from driftlab.harness.history.logfile import log_to
from driftlab.harness.history.reader import HistoryInfo, convert_to_parquet
from driftlab.harness.history.rundir import (
    ANALYSIS_OUTPUTS,
    ANALYZE_LOG,
    ANOMALIES_PARQUET,
    CONFIG_JSON,
    NotAJsonObject,
    RunDir,
    strict_json_object,
    write_json_atomically,
)

CHECKERS: tuple[str, ...] = tuple(KINDS)
SCRATCH = ".analyze"
"""The analysis's scratch folder in the run folder, gone when it ends however it ends."""
LOG_NAME = ANALYZE_LOG
NOTES = ("unseen-message", "recovered-write")
OUTPUTS = ANALYSIS_OUTPUTS
_PYSPARK_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")

log = logging.getLogger("driftlab.analyze")


class AnalysisInputError(Exception):
    """The run directory cannot be analysed as given; the message names the fix."""


@dataclass(slots=True)
class CheckerRun:
    """How one checker went in the keyed pass: `ok` or `error` (it raised on some group)."""

    name: str
    status: str = "ok"
    error: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AnalysisResult:
    """The analysis of one run: `analysis` is analysis.json."""

    run_dir: RunDir
    analysis: Analysis

    @property
    def counts(self) -> dict[str, int]:
        """Anomalies per kind, every kind of ALL_KINDS included."""
        return self.analysis.counts

    @property
    def verdict(self) -> str:
        """reproduced | not reproduced | unexpected anomaly | no expectations |
        inconclusive | lab failed (driftlab.checkers.verdict)."""
        return self.analysis.verdict

    @property
    def reasons(self) -> list[str]:
        """Why the run is inconclusive or the lab failed, one line each (else empty)."""
        return self.analysis.reasons

    @property
    def forbidden_found(self) -> list[str]:
        """Kinds expected absent that appeared."""
        return self.analysis.forbidden_found

    @property
    def incomplete_checkers(self) -> list[str]:
        """Checkers that failed: their kinds count zero regardless."""
        return self.analysis.incomplete_checkers


def analyze(
    run_dir: RunDir | str | os.PathLike[str],
    master: str | None = None,
    *,
    console: Console | None = None,
    per_kind: int = EXAMPLES_PER_KIND,
) -> AnalysisResult:
    """Run every check on the run's history in one keyed pass and write the outputs.

    `master` is a Spark master URL (default local[*]; see driftlab.checkers.session). Progress
    goes to `console` when given; the log to RUN_DIR/logs/. Raises HistoryError for a
    corrupt history and AnalysisInputError for a missing run directory or a bad
    config.json; a failing checker is recorded, not raised.
    """
    started = time.perf_counter()
    folder = RunDir(_run_dir(run_dir))
    run = folder.path
    config = _read_config(run)
    header = _run_block(run, config)
    expectations = _expectations(config)
    folder.logs.mkdir(exist_ok=True)
    say = console.print if console is not None else (lambda *a, **k: None)
    # PySpark logs a failing query's context to stderr on its own loggers: a checker's
    # error belongs in the log file, the terminal gets one line.
    pyspark_loggers = [PySparkLogger.getLogger(n) for n in _PYSPARK_LOGGERS]
    with log_to(folder.analyze_log, take_over=pyspark_loggers):
        log.info("analysing %s", run)
        timings: dict[str, float] = {}
        t = time.perf_counter()
        info = convert_to_parquet(run)
        timings["convert_s"] = time.perf_counter() - t
        say(f"[dim]history:[/] {info.events:,} events in {info.segments} segment(s)")

        spark = start_spark(master, folder.analyze_log)
        scratch = run / SCRATCH
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        try:
            t = time.perf_counter()
            done = keyed_pass(
                spark, folder.parquet, scratch / ANOMALIES_PARQUET, info.events, per_kind
            )
            os.replace(scratch / ANOMALIES_PARQUET, folder.anomalies)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        figures, t0_ns, t1_ns = done.figures, done.t0_ns, done.t1_ns
        runs = _checker_runs(figures)
        timings["checkers_s"] = time.perf_counter() - t
        for r in runs:
            _say_checker(say, r)

        t = time.perf_counter()
        counts = _counts(runs)
        write_output(
            folder.examples,
            Examples(per_kind=per_kind, kinds=examples(figures.examples, counts, t0_ns)),
            indent=None,
        )
        series: dict[str, Any] = {
            "t0_ns": t0_ns,
            "t1_ns": t1_ns,
            "bucket_s": bucket_seconds(t0_ns, t1_ns),
            **figures.history_series,
        }
        series["anomalies"] = figures.anomaly_series
        series["lag"] = [] if "staleness" in figures.errors else figures.lag_series
        lag = {} if "staleness" in figures.errors else figures.lag
        # The realtime lag comes from the reorder checker's partition groups.
        if "reorder" in figures.errors:
            series[REALTIME_SERIES], realtime = [], None
        else:
            realtime = _realtime_lag(series[REALTIME_SERIES], t0_ns)
        # Notes come from the lost checker's groups: a failure leaves them unknown.
        notes = {} if "lost" in figures.errors else {n: figures.notes[n] for n in NOTES}
        write_json_atomically(folder.series, {"schema": ANALYSIS_SCHEMA, **series}, indent=None)
        timings["outputs_s"] = time.perf_counter() - t

        lost_where = {} if "lost" in figures.errors else dict(sorted(figures.lost_where.items()))
        coverage = {k: int(figures.chances.get(k, 0)) for k in ALL_KINDS}
        facts = _facts(run, config, series, (t1_ns - t0_ns) / 1e9, sorted(figures.errors))
        verdict = decide(counts, coverage, expectations, facts)
        timings["total_s"] = time.perf_counter() - started
        analysis = Analysis(
            run=header,
            history=_history_block(info, t0_ns, t1_ns),
            counts=counts,
            coverage=coverage,
            counts_by_checker={
                name: sum(counts.get(k, 0) for k in kinds) for name, kinds in KINDS.items()
            },
            notes=notes,
            lost_where=lost_where,
            lag=lag,
            realtime_lag=realtime,
            expectations=expectations,
            # decide's Verdict, field for field: the verdict and the kinds, reasons,
            # untested kinds and caveats behind it.
            **asdict(verdict),
            inconclusive=verdict.reasons if verdict.verdict == INCONCLUSIVE else [],
            lab_failures=list(facts.lab_failures) if verdict.verdict == LAB_FAILED else [],
            checkers={r.name: CheckerStatus(status=r.status, error=r.error) for r in runs},
            timings=Timings(**{k: round(v, 3) for k, v in timings.items()}),
            spark=SparkInfo(master=spark.sparkContext.master, version=spark.version),
        )
        write_output(folder.analysis, analysis)
        log.info(
            "verdict %s %s; counts %s; chances %s; timings %s",
            verdict.verdict,
            verdict.reasons,
            counts,
            coverage,
            timings,
        )
    return AnalysisResult(folder, analysis)


def _run_dir(run_dir: RunDir | str | os.PathLike[str]) -> Path:
    """The run directory, `runs/latest` and other links resolved."""
    p = Path(run_dir)
    if not p.exists():
        raise AnalysisInputError(
            f"{p}: no such run directory; pass one such as runs/latest or "
            "runs/<scenario>/<time>-<seed>"
        )
    if not p.is_dir():
        raise AnalysisInputError(f"{p}: not a directory; pass a run directory such as runs/latest")
    return p.resolve()


def _read_config(run: Path) -> dict[str, Any]:
    path = run / CONFIG_JSON
    try:
        return strict_json_object(path)
    except FileNotFoundError:
        log.warning("%s: missing; analysing without expectations", path)
        return {}
    except NotAJsonObject as e:
        raise AnalysisInputError(
            f"{e}; fix the file (a JSON object: scenario, seed, params, ...) or re-run the scenario"
        ) from None


def _run_block(run: Path, config: dict[str, Any]) -> RunBlock:
    """analysis.json's `run`: config.json's scenario and seed are checked before any
    work, as bad input."""
    return validated(
        RunBlock,
        {"run_dir": str(run), "scenario": config.get("scenario"), "seed": config.get("seed")},
        lambda why: AnalysisInputError(
            f"{run / CONFIG_JSON}: {why}; fix the file or re-run the scenario"
        ),
    )


def _facts(
    run: Path, config: dict[str, Any], series: dict[str, Any], span_s: float, failed: list[str]
) -> RunFacts:
    """The run's facts for its verdict, with the checkers that `failed`."""
    facts = run_facts(RunDir(run), config, series, span_s)
    return replace(facts, failed_checkers=tuple(failed))


def _expectations(config: dict[str, Any]) -> dict[str, str]:
    """config.json's expectations; they and its `min_chances` are checked before any
    work, as bad input."""
    try:
        check_min_chances(config.get("min_chances"))
        return check_expectations(config.get("expectations"))
    except ExpectationError as e:
        raise AnalysisInputError(str(e)) from None


def _checker_runs(figures: PassFigures) -> list[CheckerRun]:
    """Each checker's status and counts. Every one ran in the same pass, interleaved
    group by group: `timings.checkers_s` is that pass's time, no checker has its own."""
    runs = []
    for name in CHECKERS:
        run = CheckerRun(name, counts=dict(figures.counts.get(name, {})))
        if name in figures.errors:
            run.status, run.error, run.counts = "error", figures.errors[name].splitlines()[0], {}
            log.error("checker %s failed:\n%s", name, figures.errors[name])
        runs.append(run)
    return runs


def _say_checker(say: Any, run: CheckerRun) -> None:
    if run.status != "ok":
        say(f"  [red]{run.name:<14} error[/] {(run.error or '')[:120]} (see logs/{LOG_NAME})")
        return
    total = sum(run.counts.values())
    colour = "green" if total == 0 else "bold red"
    noun = "anomaly" if total == 1 else "anomalies"
    say(f"  {run.name:<14} [{colour}]{total:>8,} {noun}[/]")
    log.info("checker %s: %s", run.name, run.counts)


def _counts(runs: list[CheckerRun]) -> dict[str, int]:
    """Every kind of ALL_KINDS (zero included), then any other kind a checker returned."""
    found: dict[str, int] = {}
    for r in runs:
        for kind, n in r.counts.items():
            found[kind] = found.get(kind, 0) + n
    counts = {k: found.pop(k, 0) for k in ALL_KINDS}
    counts.update(sorted(found.items()))
    return counts


def _realtime_lag(per_partition: list[dict[str, Any]], t0_ns: int) -> RealtimeLagBlock:
    """analysis.json's realtime lag: how many channel partitions had polls, and the
    worst poll of all (Jepsen's :worst-realtime-lag), None without a poll."""
    worst = worst_realtime_lag(RealtimeLag.from_dict(r) for r in per_partition)
    return RealtimeLagBlock(
        partitions=len(per_partition),
        worst=None
        if worst is None
        else WorstPoll(
            **worst.to_dict(),
            t=round((worst.time - t0_ns) / 1e9, 3),
            lag_ms=worst.lag_ns / 1e6,
        ),
    )


def _history_block(info: HistoryInfo, t0_ns: int, t1_ns: int) -> HistoryBlock:
    """analysis.json's `history`: what the reader reported, and the history's span."""
    said = ("events", "segments", "complete", "cut_short", "dropped_partial_lines")
    return HistoryBlock(t0_ns=t0_ns, t1_ns=t1_ns, **{name: getattr(info, name) for name in said})
