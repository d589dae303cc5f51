"""`import_history`: a Jepsen history file recorded as a driftlab run folder, with the
config.json whose expectations forbid what Jepsen's checker forbids."""

from __future__ import annotations

import io
import os
import time as _time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.history.schema import RunHeader
from driftlab.harness.lab.importers import edn
from driftlab.harness.lab.importers.jepsen.convert import Converter
from driftlab.harness.lab.importers.jepsen.kinds import FORBIDDEN, JEPSEN_NAMES, REBALANCE_ALLOWED
from driftlab.harness.lab.importers.jepsen.reading import (
    FORMATS,
    JepsenImportError,
    detect_format,
    read_ops,
)

SCENARIO = "jepsen"


@dataclass(slots=True)
class ImportSummary:
    """What an import read and wrote."""

    source: str
    format: str
    ops: int = 0
    events: int = 0
    sends: int = 0
    polled: int = 0
    keys: int = 0
    processes: int = 0
    subscribe: bool = False
    started_ns: int = 0
    seconds: float = 0.0
    expectations: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """ops that could not be read, one line per kind (docs/jepsen.md)"""
    unreadable: list[str] = field(default_factory=list)
    """why the history cannot be judged (it becomes inconclusive), one line each"""


def import_history(
    path: str | os.PathLike[str],
    run_dir: str | os.PathLike[str],
    fmt: str | None = None,
    wrap: Callable[[BinaryIO], BinaryIO] | None = None,
) -> ImportSummary:
    """Record the Jepsen history at `path` as the history of `run_dir` (which gets
    `history/` and `config.json`); `fmt` is `edn` or `json`, by default from the name.
    `wrap`, when given, wraps the file's bytes as they are read (a progress bar's
    reader: a large history takes minutes)."""
    source = Path(path)
    run = Path(run_dir)
    fmt = fmt or detect_format(source)
    if fmt not in FORMATS:
        raise JepsenImportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    started = _time.perf_counter()
    summary = ImportSummary(source=str(source), format=fmt)
    header = RunHeader(
        run_id=f"{SCENARIO}-{source.stem}-{run.name}",
        scenario=SCENARIO,
        seed=0,
        params={"source": str(source), "format": fmt},
    )
    try:
        raw = source.open("rb")
    except OSError as e:
        raise JepsenImportError(f"{source}: {e.strerror}; pass a Jepsen history file") from None
    stream = io.TextIOWrapper(wrap(raw) if wrap else raw, encoding="utf-8")
    with stream, Recorder(run, header, role="jepsen", batch_size=8192, flush_interval=1.0) as rec:
        converter = Converter(rec)
        try:
            converter.convert(read_ops(stream, fmt))
        except edn.EDNError as e:
            raise JepsenImportError(f"{source}: {e}") from None
        except UnicodeDecodeError as e:
            raise JepsenImportError(f"{source}: not UTF-8 text ({e.reason})") from None
        converter.finish()
        summary.started_ns = converter.base
        summary.ops = converter.ops
        summary.events = converter.events
        summary.sends = converter.sends
        summary.polled = converter.polled
        summary.keys = len(converter.channels)
        summary.processes = len(converter.procs)
        summary.subscribe = converter.subscribe
        summary.warnings = converter.warnings()
        summary.unreadable = converter.unreadable()
    summary.expectations = {
        kind: "absent"
        for kind in FORBIDDEN
        if not (summary.subscribe and kind in REBALANCE_ALLOWED)
    }
    summary.seconds = _time.perf_counter() - started
    _write_config(run, source, summary)
    return summary


def _write_config(run: Path, source: Path, summary: ImportSummary) -> None:
    started = datetime.fromtimestamp(summary.started_ns / 1e9, UTC)
    config = {
        "scenario": SCENARIO,
        "seed": 0,
        "started_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "expectations": summary.expectations,
        "unreadable": summary.unreadable,
        "params": {
            "summary": f"Jepsen kafka history {source.name}, imported (docs/jepsen.md)",
            "setup": "imported Jepsen kafka history",
            "import": asdict(summary),
        },
        "foreign_names": {"tool": "Jepsen", "kinds": JEPSEN_NAMES},
    }
    RunDir(run).write_config(config)
