"""Analyse a run: every Spark checker over its history, and the files of docs/analysis.md.

`analyze(run_dir)` converts the history to Parquet (harness.history.reader), reads it
as one Spark frame (not cached: see _read_history), runs each
`checkers.spark.<name>.check` (each result written to a scratch Parquet directory once,
so it is computed once), then writes analysis.json, anomalies.parquet, examples.json
and series.json. Only aggregates and a few sampled rows ever reach the driver.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import shutil
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pyspark.logger import PySparkLogger
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console

from checkers.anomaly import ALL_KINDS, KINDS, SPARK_DDL
from checkers.outputs import examples, write_single_parquet
from checkers.series import compute_series
from checkers.session import get_spark
from checkers.spark.common import carried_writes
from checkers.verdict import ExpectationError, check_expectations, judge
from harness.history.reader import PARQUET_NAME, HistoryInfo, convert_to_parquet

ANALYSIS_SCHEMA = 1
CHECKERS: tuple[str, ...] = tuple(KINDS)
EXAMPLES_PER_KIND = 5
SCRATCH = ".analyze"
LOG_NAME = "analyze.log"
MATCHING = ("graph",)
"""Checkers whose `check(events, carried)` takes carried_writes(events): the matching of
effects to writes is computed once per analysis, for them and for the staleness lag."""
OUTPUTS = ("analysis.json", "anomalies.parquet", "examples.json", "series.json")

NotesAndLag = tuple[dict[str, Any], dict[str, Any], DataFrame | None]
"""lost.notes, staleness.lag and staleness.lag_series (None when not computed)."""

_PYSPARK_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")

log = logging.getLogger("driftlab.analyze")


class AnalysisInputError(Exception):
    """The run directory cannot be analysed as given; the message names the fix."""


@dataclass(slots=True)
class CheckerRun:
    """How one checker went: `ok`, `missing` (no module) or `error`."""

    name: str
    status: str = "ok"
    seconds: float = 0.0
    error: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AnalysisResult:
    """The analysis of one run: `analysis` is the content of analysis.json."""

    run_dir: Path
    analysis: dict[str, Any]

    @property
    def counts(self) -> dict[str, int]:
        """Anomalies per kind, every kind of ALL_KINDS included."""
        return self.analysis["counts"]

    @property
    def verdict(self) -> str:
        """reproduced | not reproduced | unexpected anomaly | no expectations."""
        return self.analysis["verdict"]

    @property
    def forbidden_found(self) -> list[str]:
        """Kinds expected absent that appeared."""
        return self.analysis["forbidden_found"]

    @property
    def cut_short(self) -> bool:
        """The history has no END mark: the run was killed before it closed it."""
        return self.analysis["history"]["cut_short"]

    @property
    def incomplete_checkers(self) -> list[str]:
        """Checkers that are missing or failed: their kinds count zero regardless."""
        return [n for n, c in self.analysis["checkers"].items() if c["status"] != "ok"]


def analyze(
    run_dir: str | os.PathLike[str],
    master: str | None = None,
    *,
    console: Console | None = None,
    per_kind: int = EXAMPLES_PER_KIND,
) -> AnalysisResult:
    """Run every Spark checker on the run's history and write the analysis outputs.

    `master` is a Spark master URL (default local[*]; see checkers.session). Progress
    goes to `console` when given, one line per checker; the log to RUN_DIR/logs/.
    Raises HistoryError for a corrupt history and AnalysisInputError for a missing run
    directory or a bad config.json; a failing checker is recorded, not raised.
    """
    started = time.perf_counter()
    run = _run_dir(run_dir)
    config = _read_config(run)
    expectations = _expectations(config)
    logs = run / "logs"
    logs.mkdir(exist_ok=True)
    say = console.print if console is not None else (lambda *a, **k: None)
    with _log_to(logs / LOG_NAME):
        log.info("analysing %s", run)
        timings: dict[str, float] = {}
        t = time.perf_counter()
        info = convert_to_parquet(run)
        timings["convert_s"] = time.perf_counter() - t
        say(f"[dim]history:[/] {info.events:,} events in {info.segments} segment(s)")

        spark = _spark(master, logs / LOG_NAME)
        scratch = run / SCRATCH
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        try:
            t = time.perf_counter()
            events = _read_history(spark, run / PARQUET_NAME)
            bounds = events.agg(F.min("time").alias("t0"), F.max("time").alias("t1")).first()
            t0_ns, t1_ns = int(bounds["t0"] or 0), int(bounds["t1"] or 0)
            timings["load_s"] = time.perf_counter() - t

            t = time.perf_counter()
            # Narrow (no event structs) and cached: its two joins are the costliest step
            # the matching's users share; the first of them to run fills the cache.
            carried = carried_writes(events).cache()
            runs, parts, (notes, lag, lag_series) = _run_checkers(
                spark, events, carried, t0_ns, scratch, say
            )
            timings["checkers_s"] = time.perf_counter() - t

            t = time.perf_counter()
            anomalies = _anomalies(spark, parts)
            write_single_parquet(anomalies, run / "anomalies.parquet", scratch)
            stored = spark.read.parquet(str(run / "anomalies.parquet"))
            _write_json(
                run / "examples.json",
                {
                    "schema": ANALYSIS_SCHEMA,
                    "per_kind": per_kind,
                    "kinds": examples(stored, per_kind, t0_ns),
                },
            )
            series = compute_series(events, stored, t0_ns, t1_ns, lag_series)
            _write_json(run / "series.json", {"schema": ANALYSIS_SCHEMA, **series})
            timings["outputs_s"] = time.perf_counter() - t
            carried.unpersist()
            events.unpersist()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

        counts = _counts(runs)
        verdict = judge(counts, expectations)
        timings["total_s"] = time.perf_counter() - started
        analysis = {
            "schema": ANALYSIS_SCHEMA,
            "run": {
                "run_dir": str(run),
                "scenario": config.get("scenario"),
                "seed": config.get("seed"),
            },
            "history": _history_block(info, t0_ns, t1_ns),
            "counts": counts,
            "counts_by_checker": {
                name: sum(counts.get(k, 0) for k in kinds) for name, kinds in KINDS.items()
            },
            "notes": notes,
            "lag": lag,
            "expectations": expectations,
            "verdict": verdict.verdict,
            "forbidden_found": verdict.forbidden_found,
            "expected_missing": verdict.expected_missing,
            "checkers": {
                r.name: {"status": r.status, "seconds": round(r.seconds, 3), "error": r.error}
                for r in runs
            },
            "timings": {k: round(v, 3) for k, v in timings.items()},
            "spark": {"master": spark.sparkContext.master, "version": spark.version},
        }
        _write_json(run / "analysis.json", analysis, indent=2)
        log.info("verdict %s; counts %s; timings %s", verdict.verdict, counts, timings)
    return AnalysisResult(run, analysis)


def _run_dir(run_dir: str | os.PathLike[str]) -> Path:
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
    path = run / "config.json"
    if not path.exists():
        log.warning("%s: missing; analysing without expectations", path)
        return {}
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise AnalysisInputError(
            f"{path}: not readable JSON ({e}); fix the file or re-run the scenario"
        ) from None
    if not isinstance(config, dict):
        raise AnalysisInputError(f"{path}: must hold a JSON object (scenario, seed, params, ...)")
    return config


def _expectations(config: dict[str, Any]) -> dict[str, str]:
    try:
        return check_expectations(config.get("expectations"))
    except ExpectationError as e:
        raise AnalysisInputError(str(e)) from None


@contextlib.contextmanager
def _log_to(path: Path) -> Iterator[None]:
    """driftlab's log records go to `path` for the analysis (never to the terminal)."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("driftlab")
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    # PySpark logs a failing query's context to stderr on its own loggers: a checker's
    # error belongs in the log file, the terminal gets one line.
    pyspark_loggers = [PySparkLogger.getLogger(n) for n in _PYSPARK_LOGGERS]
    saved = [lg.handlers for lg in pyspark_loggers]
    for lg in pyspark_loggers:
        lg.handlers = [handler]
    try:
        yield
    finally:
        for lg, handlers in zip(pyspark_loggers, saved, strict=True):
            lg.handlers = handlers
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()


def _spark(master: str | None, log_path: Path) -> SparkSession:
    """The process's session; a new JVM gets `log_path` as its stderr, so Spark's own
    log lines land in the run's log instead of the terminal."""
    if SparkSession.getActiveSession() is not None:
        return get_spark(master)
    saved = os.dup(2)
    try:
        with open(log_path, "ab") as f:
            os.dup2(f.fileno(), 2)
            try:
                return get_spark(master)
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def _read_history(spark: SparkSession, path: Path) -> DataFrame:
    """The history, in at least two partitions per core.

    Not cached: at 5M events filling the cache took 11-16 s, and a scan of the cache was
    no faster than a Parquet scan that reads only the columns a step uses.
    Spark splits Parquet files into 128 MB partitions: a history of a few million events
    would be read (and every checker's first stage run) by one core.
    """
    cores = spark.sparkContext.defaultParallelism
    split = max(1 << 20, path.stat().st_size // (2 * cores) + 1)
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(split))
    return spark.read.parquet(str(path))


def _module(name: str) -> ModuleType | None:
    """checkers.spark.<name>, or None when that module does not exist (yet)."""
    full = f"checkers.spark.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as e:
        if e.name == full:
            return None
        raise


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _run_checkers(
    spark: SparkSession,
    events: DataFrame,
    carried: DataFrame,
    t0_ns: int,
    scratch: Path,
    say: Any,
) -> tuple[list[CheckerRun], list[Path], NotesAndLag]:
    """Each checker's rows written once to scratch/<name>; their counts per kind; the
    notes and lag (_notes_and_lag).

    The checkers run as concurrent Spark jobs: many of their stages have fewer tasks than
    cores (a window over a few channels, a driver-side step, a final single-partition
    write), and a second job fills the idle cores meanwhile. Results keep CHECKERS order.
    """
    runs = [CheckerRun(name) for name in CHECKERS]
    workers = max(2, spark.sparkContext.defaultParallelism)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="checker") as pool:
        started = {
            r.name: pool.submit(_run_checker, spark, events, carried, scratch / r.name, r, say)
            for r in runs
        }
        # Queued behind every checker, notes and lag run beside the last ones; the checkers
        # they wait for were queued before them, so no worker waits for a queued task.
        extras = pool.submit(_notes_and_lag, events, carried, t0_ns, runs, started, say)
    parts = [scratch / r.name for r in runs if r.status == "ok"]
    return runs, parts, extras.result()


def _run_checker(
    spark: SparkSession,
    events: DataFrame,
    carried: DataFrame,
    out: Path,
    run: CheckerRun,
    say: Any,
) -> None:
    """Run one checker into `out`, recording its status, time and counts in `run`."""
    name = run.name
    t = time.perf_counter()
    try:
        mod = _module(name)
        if mod is None:
            run.status, run.error = "missing", f"no module checkers.spark.{name}"
            say(f"  [yellow]{name:<14} missing[/] (no module checkers.spark.{name})")
            log.warning("checker %s: no module checkers.spark.%s", name, name)
            return
        found = mod.check(events, carried) if name in MATCHING else mod.check(events)
        found.write.mode("overwrite").parquet(str(out))
        rows = spark.read.parquet(str(out)).groupBy("kind").count().collect()
    except Exception as e:  # a broken checker must not hide the others' results
        run.status, run.error = "error", _first_line(e)
        run.seconds = time.perf_counter() - t
        log.error("checker %s failed:\n%s", name, traceback.format_exc())
        say(f"  [red]{name:<14} error[/] {run.error[:120]} (see logs/{LOG_NAME})")
        return
    run.seconds = time.perf_counter() - t
    run.counts = {r["kind"]: int(r["count"]) for r in rows}
    total = sum(run.counts.values())
    colour = "green" if total == 0 else "bold red"
    say(f"  {name:<14} [{colour}]{total:>8,} anomalies[/]  {run.seconds:6.1f}s")
    log.info("checker %s: %s in %.2fs", name, run.counts, run.seconds)


def _notes_and_lag(
    events: DataFrame,
    carried: DataFrame,
    t0_ns: int,
    runs: list[CheckerRun],
    started: dict[str, Future[None]],
    say: Any,
) -> NotesAndLag:
    """lost.notes, staleness.lag and staleness.lag_series, each once its checker (in
    `started`) has run without error."""
    status = {r.name: r for r in runs}

    def ran_ok(name: str) -> bool:
        started[name].result()
        return status[name].status == "ok"

    notes: dict[str, Any] = {}
    lag: dict[str, Any] = {}
    series = None
    try:
        if ran_ok("lost") and (lost := _module("lost")) is not None:
            notes = lost.notes(events)
        if ran_ok("staleness") and (staleness := _module("staleness")) is not None:
            lag = staleness.lag(events, carried)
            series = staleness.lag_series(events, carried, t0_ns)
    except Exception as e:  # notes are secondary: keep the anomalies
        log.error("notes or lag failed:\n%s", traceback.format_exc())
        say(f"  [red]notes/lag error[/] {_first_line(e)[:120]} (see logs/{LOG_NAME})")
    return notes, lag, series


def _anomalies(spark: SparkSession, parts: list[Path]) -> DataFrame:
    """Every anomaly row, sorted (docs/analysis.md)."""
    if not parts:
        return spark.createDataFrame([], SPARK_DDL)
    frame = spark.read.schema(SPARK_DDL).parquet(*[str(p) for p in parts])
    # It is written as one file anyway: one task sorts it, with no job sampling the
    # range partitions of a global sort.
    return frame.repartition(1).sortWithinPartitions("time", "kind", "store", "key", "consumer")


def _counts(runs: list[CheckerRun]) -> dict[str, int]:
    """Every kind of ALL_KINDS (zero included), then any other kind a checker returned."""
    found: dict[str, int] = {}
    for r in runs:
        for kind, n in r.counts.items():
            found[kind] = found.get(kind, 0) + n
    counts = {k: found.pop(k, 0) for k in ALL_KINDS}
    counts.update(sorted(found.items()))
    return counts


def _history_block(info: HistoryInfo, t0_ns: int, t1_ns: int) -> dict[str, Any]:
    return {
        "events": info.events,
        "segments": info.segments,
        "complete": info.complete,
        "cut_short": info.cut_short,
        "dropped_partial_lines": info.dropped_partial_lines,
        "t0_ns": t0_ns,
        "t1_ns": t1_ns,
    }


def _write_json(path: Path, data: dict[str, Any], indent: int | None = None) -> None:
    """Write atomically: a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=indent, separators=None if indent else (",", ":")))
    os.replace(tmp, path)
