"""The run folder and the runs folder: the one place that knows their paths.

A run folder is the unit everything reads and writes (as Jepsen's store):

    runs/                       RunsDir: every run, the `latest` link, the suite's pages
      latest -> <scenario>/<UTC time>-<seed>
      index.json, index.html    the suite's (or the matrix's) list of runs and its page
      matrix.json               the cells a matrix ran and skipped
      <scenario>/<UTC time>-<seed>/   RunDir
        config.json             the scenario, seed, parameters, expectations, versions
        history/<writer>.jsonl  the history, one segment per writer process
        history.parquet         the segments converted for analysis
        analysis.json, anomalies.parquet, examples.json, series.json   the analysis
        report.html             the run's report
        replay.json             a replay's simulated and real anomaly kinds
        logs/                   runner.log, analyze.log, run.json, services' and workers' logs

Every module asks these types for a path; no other module spells a file name of either
folder. Paths are absolute from creation: a run folder is handed to child processes
(consumers, workers, application instances) that run in other working directories,
where a relative path would point nowhere. This module imports only the history's
layout (a leaf), so the history, the checkers and the reports may all use it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftlab.harness.history.layout import HISTORY_DIR, PARQUET_NAME

CONFIG_JSON = "config.json"
ANALYSIS_JSON = "analysis.json"
ANOMALIES_PARQUET = "anomalies.parquet"
EXAMPLES_JSON = "examples.json"
SERIES_JSON = "series.json"
ANALYSIS_OUTPUTS = (ANALYSIS_JSON, ANOMALIES_PARQUET, EXAMPLES_JSON, SERIES_JSON)
"""What `driftlab analyze` writes into a run folder."""
REPORT_HTML = "report.html"
REPLAY_JSON = "replay.json"
"""A replay's simulated and real anomaly kinds (`driftlab replay`)."""
LOGS_DIR = "logs"
SUMMARY_JSON = "run.json"
"""`logs/run.json`: the runner's own figures (ops, rate, timings)."""
RUNNER_LOG = "runner.log"
ANALYZE_LOG = "analyze.log"

LATEST = "latest"
INDEX_JSON = "index.json"
INDEX_HTML = "index.html"
MATRIX_JSON = "matrix.json"
SPARK_LOG = "spark.log"


def utc_stamp() -> str:
    """Compact UTC time of now, as used in run folder names."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def write_json_atomically(
    path: Path, data: Any, *, sort_keys: bool = False, indent: int | None = 2
) -> Path:
    """Write `data` as JSON to `path` through a temporary file: no reader ever sees
    half a file. `indent=None` writes it compact (large outputs such as series.json)."""
    tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
    separators = None if indent else (",", ":")
    text = json.dumps(data, indent=indent, separators=separators, sort_keys=sort_keys, default=str)
    tmp.write_text(text + "\n")
    os.replace(tmp, path)
    return path


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path`, or {} when the file is missing, unreadable or holds
    something else: summaries of runs that died half-way must still list them."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class NotAJsonObject(ValueError):
    """A file that should hold a JSON object does not: the message says why, and the
    caller adds the fix."""


def strict_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; NotAJsonObject when the file cannot be read, is not
    JSON or holds something else (FileNotFoundError when it is missing)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        raise NotAJsonObject(f"{path} is not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise NotAJsonObject(f"{path} does not hold a JSON object")
    return data


@dataclass(frozen=True)
class _Folder:
    """A folder held by its absolute path, whatever the working directory was."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path).absolute())

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class RunsDir(_Folder):
    """The runs folder: run folders by scenario, `latest`, the suite's index and page."""

    @property
    def latest(self) -> Path:
        """The symlink to the newest run folder."""
        return self.path / LATEST

    @property
    def index_json(self) -> Path:
        """The suite's (or matrix's) list of runs."""
        return self.path / INDEX_JSON

    @property
    def index_html(self) -> Path:
        """The suite page."""
        return self.path / INDEX_HTML

    @property
    def matrix_json(self) -> Path:
        """The cells a matrix ran and skipped."""
        return self.path / MATRIX_JSON

    @property
    def spark_log(self) -> Path:
        """The log of a Spark session the suite started ahead of its first analysis."""
        return self.path / LOGS_DIR / SPARK_LOG

    def point_latest(self, run: RunDir) -> None:
        """Atomically replace `latest` (relative, so the tree can move)."""
        tmp = self.path / f".{LATEST}.{secrets.token_hex(4)}"
        os.symlink(os.path.relpath(run.path, self.path), tmp)
        os.replace(tmp, self.latest)

    def drop_dangling_latest(self) -> None:
        """Remove `latest` if the run folder it names is gone."""
        if self.latest.is_symlink() and not self.latest.exists():
            self.latest.unlink()


@dataclass(frozen=True)
class RunDir(_Folder):
    """One run folder and every path in it (absolute)."""

    @classmethod
    def create(cls, runs_dir: Path | RunsDir, scenario: str, seed: int) -> RunDir:
        """Create a fresh `<runs>/<scenario>/<UTC time>-<seed>/` with `history/` and
        `logs/` inside, and point `latest` at it."""
        runs = runs_dir if isinstance(runs_dir, RunsDir) else RunsDir(Path(runs_dir).resolve())
        base = runs.path / scenario
        base.mkdir(parents=True, exist_ok=True)
        stamp = utc_stamp()
        path = base / f"{stamp}-{seed}"
        n = 1
        while True:
            try:
                path.mkdir()
                break
            except FileExistsError:
                # Two runs of one scenario and seed within a second: keep both.
                n += 1
                path = base / f"{stamp}-{seed}.{n}"
        run = cls(path)
        run.history.mkdir()
        run.logs.mkdir()
        runs.point_latest(run)
        return run

    def discard(self) -> None:
        """Remove this run folder (and `latest`, when it named it): a run that never
        happened leaves nothing to be read as one."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.runs.drop_dangling_latest()
        for emptied in (self.path.parent, self.path.parent.parent):
            with contextlib.suppress(OSError):
                emptied.rmdir()  # the scenario's folder, the runs folder: if this was all

    def drop_history(self) -> None:
        """Remove the run's history, its segments and its Parquet file: a generator
        writing a new history into a folder that held one leaves nothing of the old."""
        for stale in (self.history, self.parquet):
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink(missing_ok=True)

    @property
    def run_id(self) -> str:
        """`<scenario>/<time>-<seed>`: the run's name in its runs folder."""
        return f"{self.path.parent.name}/{self.path.name}"

    @property
    def runs(self) -> RunsDir:
        """The runs folder this run folder belongs to."""
        return RunsDir(self.path.parent.parent)

    @property
    def config(self) -> Path:
        """config.json: what was run (scenario, seed, parameters, expectations)."""
        return self.path / CONFIG_JSON

    @property
    def history(self) -> Path:
        """The folder of the history's JSON-lines segments."""
        return self.path / HISTORY_DIR

    @property
    def parquet(self) -> Path:
        """The history converted to Parquet for analysis."""
        return self.path / PARQUET_NAME

    @property
    def analysis(self) -> Path:
        """analysis.json: the verdict, counts and the history's facts."""
        return self.path / ANALYSIS_JSON

    @property
    def anomalies(self) -> Path:
        """anomalies.parquet: every anomaly found."""
        return self.path / ANOMALIES_PARQUET

    @property
    def examples(self) -> Path:
        """examples.json: a few anomalies of each kind with their evidence."""
        return self.path / EXAMPLES_JSON

    @property
    def series(self) -> Path:
        """series.json: the figures' time series."""
        return self.path / SERIES_JSON

    @property
    def analysis_outputs(self) -> tuple[Path, ...]:
        """Every file `driftlab analyze` writes."""
        return tuple(self.path / name for name in ANALYSIS_OUTPUTS)

    @property
    def report(self) -> Path:
        """report.html."""
        return self.path / REPORT_HTML

    @property
    def replay(self) -> Path:
        """replay.json: the anomaly kinds a replay's simulation showed and the real
        stack showed."""
        return self.path / REPLAY_JSON

    @property
    def logs(self) -> Path:
        """The folder of every log of the run."""
        return self.path / LOGS_DIR

    @property
    def summary(self) -> Path:
        """logs/run.json: the runner's own figures."""
        return self.logs / SUMMARY_JSON

    @property
    def runner_log(self) -> Path:
        """logs/runner.log: the harness's log records of the run."""
        return self.logs / RUNNER_LOG

    @property
    def analyze_log(self) -> Path:
        """logs/analyze.log: the analysis's log (Spark's included)."""
        return self.logs / ANALYZE_LOG

    def log(self, name: str) -> Path:
        """logs/<name>: the log (or status file) of one process of the run."""
        return self.logs / name

    def write_config(self, config: dict[str, Any]) -> Path:
        """Write config.json atomically."""
        return write_json_atomically(self.config, config, sort_keys=True)

    def read_config(self) -> dict[str, Any]:
        """config.json as written ({} when there is none)."""
        try:
            data: dict[str, Any] = json.loads(self.config.read_text())
        except FileNotFoundError:
            return {}
        return data


# logs/run.json, typed: the runner's own figures of a run and what its setup found of
# the system under test outside the history. driftlab.harness.lab.runner.runner alone writes it; the
# verdict's facts (driftlab.checkers.run_facts) and the reports read it through `RunSummary.read`.

KEYS_KEPT = 100
"""The differing keys run.json keeps per store (`count` says how many there were)."""


@dataclass(frozen=True)
class NotConverged:
    """A store that did not equal the source after the convergence wait."""

    store: str
    keys: list[str]  # the first KEYS_KEPT differing keys, sorted
    count: int
    settled: bool  # unchanged for the wait's window, else still changing
    since_s: float | None  # the oldest differing key's last write, on the report's clock
    never_held: bool
    line: str  # the reason the verdict gives, one line


@dataclass(frozen=True)
class Findings:
    """What a setup found of the system under test outside the history, each a fact
    the verdict weighs (driftlab.checkers.verdict.decide): stores that did not converge,
    processes that did not come back after a fault, stores it could not read at the
    final reading (store -> why)."""

    not_converged: list[NotConverged] = field(default_factory=list)
    not_back: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)


@dataclass
class RunSummary:
    """The content of logs/run.json. `exit_code` is None until the run is judged (a
    command killed meanwhile leaves none)."""

    run_id: str = ""
    verdict: str | None = None
    exit_code: int | None = None
    interrupted: bool = False
    interrupted_in: str | None = None
    quiesced: bool = False
    error: str | None = None
    ops: int = 0
    ops_per_s: float = 0.0
    workload_s: float = 0.0
    by_op: dict[str, int] = field(default_factory=dict)
    app_crashes: int = 0
    client_errors: int = 0
    fault_windows: int = 0
    fault_errors: list[str] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)
    lab_failures: list[dict[str, Any]] = field(default_factory=list)  # {service, at, what}
    not_converged: list[NotConverged] = field(default_factory=list)
    not_back: list[str] = field(default_factory=list)
    unreadable_stores: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    analysis_s: float = 0.0
    analysed_on: str | None = None
    stack: dict[str, Any] | None = None

    def write(self, path: Path) -> None:
        """Write it to `path` (logs/run.json), atomically."""
        write_json_atomically(path, dataclasses.asdict(self))

    @classmethod
    def read(cls, path: Path) -> RunSummary | None:
        """The summary in `path`; None when it is missing or not a JSON object. Keys
        it does not know are left out and missing ones take their defaults: a run
        recorded by an older driftlab still reads."""
        data = read_json_object(path)
        if not data:
            return None
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["not_converged"] = [
            _not_converged(d) for d in values.get("not_converged") or [] if isinstance(d, dict)
        ]
        failures = values.get("lab_failures") or []
        values["lab_failures"] = [f for f in failures if isinstance(f, dict)]
        return cls(**values)


def _not_converged(entry: dict[str, Any]) -> NotConverged:
    """One entry of run.json's `not_converged`; one written before entries held their
    `line` is told from its store and count."""
    values = {f.name: entry.get(f.name) for f in dataclasses.fields(NotConverged)}
    store, count = values["store"], values["count"]
    values["line"] = values["line"] or f"store {store}: {count} key(s) differ from the source"
    return NotConverged(**values)
