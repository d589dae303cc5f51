"""The run report: RUN_DIR/report.html, built from the analysis outputs of the run.

Reads config.json, analysis.json, examples.json, series.json and logs/run.json
(docs/analysis.md), plus the events of the few keys drawn as sequence diagrams from
history.parquet. Never loads the whole history: the report's size and cost do not
grow with the run.
"""

from __future__ import annotations

import platform
import re
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from driftlab.checkers.analysis_files import (
    Analysis,
    Example,
    Examples,
    Output,
    OutputFileError,
    read_analysis,
    read_examples,
)
from driftlab.checkers.anomaly import KINDS
from driftlab.checkers.kinds import BY_NAME, TABLE
from driftlab.checkers.reference.lost import where_lost
from driftlab.checkers.verdict import LAB_FAILED, shown_verdict
from driftlab.harness import __version__
from driftlab.harness.history.rundir import (
    ANALYZE_LOG,
    INDEX_HTML,
    RUNNER_LOG,
    SUMMARY_JSON,
    NotAJsonObject,
    RunDir,
    RunSummary,
    strict_json_object,
)
from driftlab.harness.history.schema import LOG_AUDIT, Mark
from driftlab.harness.lab.nemesis.schedule import Anchor
from driftlab.reports.plots import PALETTE, Chart, Line, Window, render_chart
from driftlab.reports.render import ReportError, write_html
from driftlab.reports.sequence import diagrams_for_run
from driftlab.reports.transactions import transactions

CLASSES: dict[str, str] = {k.checker: k.report_class for k in TABLE}
"""Anomaly classes of the summary, one per checker of driftlab.checkers.anomaly.KINDS."""

MAX_CONSUMER_CHARTS = 12
MAX_KEY_EVENTS = 4
"""Evidence events shown open per example: those that make the anomaly; the rest fold."""
SERVICE_LOGS = {
    "app.log": ("the application instances' error output", "they wrote no error output"),
    RUNNER_LOG: ("the harness's log of the run", "nothing logged"),
    ANALYZE_LOG: ("the analysis's log", "nothing logged"),
    SUMMARY_JSON: ("the runner's figures: operations, rate, timings", "not written"),
}
"""What a file of logs/ holds, and what it means empty, where its name does not say it
(a service's own log is `<service>.log`: what the service logged during the run)."""


def _load_output(read: Callable[[Path], Output], path: Path) -> Output | None:
    """The analysis output `read` reads at `path`, None when it is missing."""
    try:
        return read(path)
    except FileNotFoundError:
        return None
    except OutputFileError as e:
        raise ReportError(str(e)) from None


def _load_json(path: Path) -> dict[str, Any]:
    """The JSON object at `path`, {} when it is missing."""
    try:
        return strict_json_object(path)
    except FileNotFoundError:
        return {}
    except NotAJsonObject as e:
        raise ReportError(f"{e}; re-run `driftlab analyze {path.parent}`") from None


def render_run_report(run_dir: RunDir | str | Path) -> Path:
    """Write RUN_DIR/report.html from the run's analysis outputs and return its path.

    Raises ReportError naming the missing or unreadable file and the command that
    makes it.
    """
    folder = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    if not folder.path.is_dir():
        raise ReportError(f"{folder} is not a run directory; pass runs/<scenario>/<run>")
    return write_html(folder.report, "run.html.j2", build_context(folder))


def build_context(folder: RunDir) -> dict[str, Any]:
    """Everything the run template shows, from the run's files."""
    run = folder.path
    config = _load_json(folder.config)
    analysis = _load_output(read_analysis, folder.analysis)
    if analysis is None:
        raise ReportError(
            f"{folder.analysis} is missing; run `driftlab analyze {folder.path}` first"
        )
    examples = _load_output(read_examples, folder.examples)
    series = _load_json(folder.series)
    summary = RunSummary.read(folder.summary)
    history = analysis.history
    t0 = history.t0_ns or int(series.get("t0_ns") or 0)
    t1 = history.t1_ns or int(series.get("t1_ns") or t0)
    duration = max((t1 - t0) / 1e9, 0.0)
    windows = [
        Window(f"{f.get('kind')} {f.get('target')}", float(f["start"]), f.get("stop"))
        for f in series.get("faults", [])
    ]
    marks = [(float(m["t"]), str(m["kind"])) for m in series.get("marks", [])]
    workload_start = next((t for t, kind in marks if kind == Mark.WORKLOAD_START), None)
    params = config.get("params", {})
    expectations = analysis.expectations
    return {
        "run_name": f"{run.parent.name}/{run.name}",
        # A plain `driftlab run` writes no suite page: link one only where it exists.
        "suite_page": (run.parent.parent / INDEX_HTML).is_file(),
        "scenario": config.get("scenario") or analysis.run.scenario,
        "claim": config.get("claim") or params.get("claim"),
        "summary_text": params.get("summary"),
        "setup": params.get("setup"),
        "setup_params": params.get("setup_params") or {},
        # A pipeline file's run: its programs are black boxes, read from outside.
        "pipeline": bool((params.get("setup_params") or {}).get("pipeline_file")),
        "workload": workload_settings(params.get("workload") or {}),
        "seed": config.get("seed", analysis.run.seed),
        "started": config.get("started_utc")
        or (datetime.fromtimestamp(t0 / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t0 else None),
        "duration_s": duration,
        "t0_utc": _utc(t0),
        "history": history,
        "versions": _versions(config, analysis),
        "verdict": shown_verdict(analysis.verdict, expectations),
        "inconclusive": analysis.inconclusive,
        "untested": analysis.untested,
        "caveats": analysis.caveats,
        "lab_failed": analysis.reasons if analysis.verdict == LAB_FAILED else [],
        "verdict_rows": _verdict_rows(analysis),
        "forbidden_found": analysis.forbidden_found,
        "expected_missing": analysis.expected_missing,
        "checkers": analysis.checkers,
        "checkers_s": analysis.timings.checkers_s,
        "incomplete": analysis.incomplete_checkers,
        "counts": analysis.counts,
        "notes": analysis.notes,
        "lost_where": {k: w for k, w in analysis.lost_where.items() if any(w.values())},
        "lag": analysis.lag,
        "realtime_lag": analysis.realtime_lag.worst if analysis.realtime_lag else None,
        "runner": summary,
        "run_error": _run_error(summary, analysis),
        "classes": _classes(analysis, examples, t0, _transactions_of(folder, examples)),
        "no_chance": no_chance(analysis),
        "foreign": _foreign_names(config),
        "diagrams": diagrams_for_run(folder, examples, t0) if examples else [],
        "charts": _charts(series, duration, windows, marks),
        "workload_start": workload_start,
        "fault_rows": fault_rows(
            params.get("faults") or [], series.get("faults", []), workload_start
        ),
        "consumers": _consumers(series, duration, windows),
        "files": _files(folder),
    }


def workload_settings(workload: dict[str, Any]) -> list[str]:
    """The workload's settings as `name=value`, those that apply only: `read_own` and
    `read_stores` where the mix reads, `zipf_s` with the zipf distribution, `rotate_s`
    when it rotates; the mix as its weights (`write 3, read 1`)."""
    mix = workload.get("mix")
    reads = not isinstance(mix, dict) or bool(mix.get("read"))
    skip = {
        "read_own": not reads,
        "read_stores": not reads,
        "zipf_s": workload.get("distribution", "zipf") != "zipf",
        "rotate_s": not workload.get("rotate_s"),
    }
    out = []
    for name, value in workload.items():
        if value is None or skip.get(name):
            continue
        if isinstance(value, dict):
            shown = ", ".join(f"{k} {_number(v)}" for k, v in value.items())
        elif isinstance(value, list):
            shown = ", ".join(str(v) for v in value)
        else:
            shown = _number(value)
        out.append(f"{name}={shown}")
    return out


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _utc(ns: int) -> str | None:
    """`ns` since the epoch as UTC to the millisecond, None for 0 (unknown)."""
    if not ns:
        return None
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _versions(config: dict[str, Any], analysis: Analysis) -> dict[str, str]:
    """Component versions: what the runner recorded, then the analysis' own."""
    versions = {str(k): str(v) for k, v in (config.get("versions") or {}).items()}
    versions.setdefault("driftlab", __version__)
    versions.setdefault("spark", f"{analysis.spark.version} ({analysis.spark.master})")
    if "python" not in versions:
        versions["python (report)"] = platform.python_version()
    return versions


def _verdict_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """Expected against observed, one row per expectation."""
    rows = []
    for kind, want in analysis.expectations.items():
        n = analysis.counts.get(kind, 0)
        chances = analysis.coverage.get(kind)
        met = (n > 0) if want == "present" else (n == 0 and chances != 0)
        rows.append({"kind": kind, "expected": want, "observed": n, "met": met, "chances": chances})
    return rows


def _run_error(summary: RunSummary | None, analysis: Analysis) -> str | None:
    """The runner's error, unless it only repeats the inconclusive or lab-failed reasons
    the header already lists (the judge writes those as the run's error too)."""
    error = summary.error if summary is not None else None
    reasons = analysis.reasons
    if error and reasons and error == f"{analysis.verdict}: " + "; ".join(reasons):
        return None
    return error


def fault_rows(
    plan: list[dict[str, Any]], observed: list[dict[str, Any]], workload_start: float | None
) -> list[dict[str, Any]]:
    """One row per fault: its planned window and the window observed in the history,
    both in seconds since the history's first event. The plan counts from the
    `workload-start` mark; without one (a run recorded before it existed) the planned
    window stays on its own clock (`at`, `duration`) and `start` is None."""
    left = list(observed)
    rows: list[dict[str, Any]] = [{} for _ in plan]
    # Windows at a time first: a window at a moment has no planned time to tell it by.
    for i in sorted(range(len(plan)), key=lambda i: plan[i].get("after") is not None):
        f = plan[i]
        at, duration = float(f.get("at", 0.0)), float(f.get("duration", 0.0))
        same = [
            o for o in left if (o.get("kind"), o.get("target")) == (f.get("kind"), f.get("target"))
        ]
        # The window a fault opened names its planned `at`; older series do not.
        match = next(
            (
                o
                for o in same
                if o.get("planned_at") is not None and abs(o["planned_at"] - at) < 1e-6
            ),
            None,
        )
        if match is None and not any(o.get("planned_at") is not None for o in same) and same:
            match = same[0]
        if match is not None:
            left.remove(match)
        if f.get("after") is not None:
            # Planned at a moment: it starts when it opened, if it did.
            start = None if match is None else match.get("start")
        else:
            start = None if workload_start is None else workload_start + at
        rows[i] = {
            "kind": f.get("kind"),
            "target": f.get("target"),
            "at": at,
            "after": _moment_text(f.get("after")),
            "duration": duration,
            "start": start,
            "stop": None if start is None else start + duration,
            "observed": match,
        }
    for o in left:
        rows.append({"kind": o.get("kind"), "target": o.get("target"), "at": None, "observed": o})
    return rows


def _moment_text(after: Any) -> str | None:
    """A planned window's moment in words (config.json holds the Anchor's fields)."""
    if after is None:
        return None
    try:
        return Anchor.from_mapping(after).describe()
    except (TypeError, ValueError):
        return str(after)


def no_chance(analysis: Analysis) -> list[str]:
    """The kinds this history gave no chance that nobody named: none found, none
    expected (a pipeline's history, read from outside its programs, gives the broker's
    kinds none). The summary lists them in one line, not a row each of "0 in 0"; an
    analysis without coverage hides none."""
    coverage, named = analysis.coverage, analysis.expectations
    return [
        k for k, n in analysis.counts.items() if coverage.get(k) == 0 and not n and k not in named
    ]


def _transactions_of(folder: RunDir, examples: Examples | None) -> dict[str, str]:
    """The transaction behind each view state in the examples' evidence, by op_id."""
    kinds = examples.kinds.values() if examples else ()
    evidence = [e for kind in kinds for ex in kind.examples for e in ex.events()]
    return transactions(folder.parquet, evidence)


def _classes(
    analysis: Analysis, examples: Examples | None, t0: int, txns: dict[str, str]
) -> list[dict[str, Any]]:
    """Per anomaly class: its kinds with counts, expectation and sampled examples, but
    those of `no_chance`; a class left with no kind is left out. `txns` names the
    transaction behind each view state (by op_id)."""
    hidden = set(no_chance(analysis))
    counts = analysis.counts
    ex_kinds = examples.kinds if examples else {}
    known = {k for kinds in KINDS.values() for k in kinds}
    groups: list[tuple[str, str, tuple[str, ...]]] = [
        (checker, CLASSES.get(checker, checker), kinds) for checker, kinds in KINDS.items()
    ]
    extra = tuple(k for k in counts if k not in known)
    if extra:
        groups.append(("other", "other", extra))
    out = []
    for checker, label, kinds in groups:
        rows = []
        for kind in kinds:
            if kind in hidden:
                continue
            ex = ex_kinds.get(kind)
            known_kind = BY_NAME.get(kind)
            rows.append(
                {
                    "kind": kind,
                    "label": known_kind.label if known_kind else kind,
                    "chance_is": known_kind.chance if known_kind else "",
                    "chances": analysis.coverage.get(kind),
                    "count": counts.get(kind, 0),
                    "expected": analysis.expectations.get(kind),
                    "examples": [_example(e, t0, txns) for e in ex.examples] if ex else [],
                }
            )
        if not rows:
            continue
        total = sum(r["count"] for r in rows)
        ran = analysis.checkers.get(checker)
        status = ran.status if ran else "ok"
        out.append(
            {"checker": checker, "label": label, "total": total, "kinds": rows, "status": status}
        )
    return out


def _foreign_names(config: dict[str, Any]) -> dict[str, Any] | None:
    """For a history imported from another tool (config.json `foreign_names`, written by
    harness/lab/importers): that tool's name and its names of driftlab's kinds."""
    names = config.get("foreign_names")
    if not isinstance(names, dict) or not isinstance(names.get("kinds"), dict):
        return None
    return {"tool": str(names.get("tool", "source")), "kinds": names["kinds"]}


def _example(ex: Example, t0: int, txns: dict[str, str] | None = None) -> dict[str, Any]:
    """An example for the template: the events that make the anomaly (`evidence`, in
    time order), then the rest of its evidence (`more`, folded, as the checker gave it)."""
    evidence = ex.events()
    order = key_events(evidence, ex.detail or "", ex.time_ns)
    key = set(order)
    return {
        "t": ex.t,
        "store": ex.store,
        "key": ex.key,
        "consumer": ex.consumer,
        "detail": ex.detail or "",
        "log": where_lost(ex.detail or ""),
        "evidence": [_evidence_line(evidence[i], t0, txns) for i in order],
        "more": [_evidence_line(e, t0, txns) for i, e in enumerate(evidence) if i not in key],
    }


def key_events(evidence: list[dict[str, Any]], detail: str, at_ns: int | None) -> list[int]:
    """The positions in `evidence` of the events that make the anomaly, at most
    MAX_KEY_EVENTS: the event at the anomaly's time (the one that makes it) and those
    its detail names (a quoted value, a message id, a version), the nearest to the
    anomaly's time first; in time order. An evidence of MAX_KEY_EVENTS or fewer events is
    all key, as the checker gave it."""
    if len(evidence) <= MAX_KEY_EVENTS:
        return list(range(len(evidence)))
    quoted = set(re.findall(r"'([^']*)'", detail))
    words = set(re.findall(r"[^\s,;']+", detail))

    def named(e: dict[str, Any]) -> bool:
        return (
            (at_ns is not None and e.get("time") == at_ns)
            or (e.get("value") is not None and str(e["value"]) in quoted)
            or (e.get("msg_id") is not None and str(e["msg_id"]) in words)
            or (e.get("version") is not None and f"version {e['version']}" in detail)
        )

    picked = [i for i, e in enumerate(evidence) if named(e)] or list(range(len(evidence)))
    if at_ns is not None:
        picked.sort(key=lambda i: (abs(int(evidence[i].get("time") or 0) - at_ns), i))
    return sorted(picked[:MAX_KEY_EVENTS], key=lambda i: (int(evidence[i].get("time") or 0), i))


def _evidence_line(e: dict[str, Any], t0: int, txns: dict[str, str] | None = None) -> str:
    """One history event as a short line: when (seconds since the run's start), type,
    who, what, where; a view's state names its transaction (`txns`, by op_id)."""
    when = f"{(int(e['time']) - t0) / 1e9:.6f}s" if e.get("time") is not None else "?"
    txn = (txns or {}).get(e.get("op_id") or "")
    parts = [when, "view state" if txn else str(e.get("type", "?"))]
    if e.get("consumer") == LOG_AUDIT and e.get("action") == "deliver":
        parts[1] = "in the log, read back after quiescence:"
    else:
        for name in ("phase", "action", "f", "process", "consumer"):
            if e.get(name) is not None:
                parts.append(str(e[name]))
    if e.get("key") is not None:
        value = f"={e['value']}" if e.get("value") is not None else ""
        parts.append(f"{e['key']}{value}")
    if e.get("version") is not None:
        parts.append(f"v{e['version']}")
    if e.get("store") is not None:
        parts.append(f"@{e['store']}")
    if e.get("channel") is not None:
        part = f"[{e['partition']}]" if e.get("partition") is not None else ""
        off = f" offset {e['offset']}" if e.get("offset") is not None else ""
        parts.append(f"{e['channel']}{part}{off}")
    for name in ("msg_id", "op_id"):
        if e.get(name) is not None:
            parts.append(str(e[name]))
    if (e.get("attempt") or 1) > 1:
        parts.append(f"attempt {e['attempt']}")
    if e.get("error"):
        parts.append(f"error: {e['error']}")
    if txn:
        parts.append(f"by txn {txn}")
    return " ".join(parts)


def _charts(
    series: dict[str, Any], duration: float, windows: list[Window], marks: list[tuple[float, str]]
) -> list[Any]:
    """Throughput, latency, replication lag and anomalies over time."""
    bucket = float(series.get("bucket_s") or 1)
    t_max = duration or bucket

    def mid(t: float) -> float:
        # A bucket's value is drawn at its middle; the last bucket may be cut by the end.
        return (t + min(t + bucket, t_max)) / 2

    def lines(
        rows: list[dict[str, Any]],
        group: str,
        value: str,
        suffix: str = "",
        dashed: bool = False,
        per_second: bool = False,
    ) -> list[Line]:
        per: dict[str, list[tuple[float, float | None]]] = defaultdict(list)
        for r in rows:
            v, t = r.get(value), float(r["t"])
            if v is not None and per_second:
                v = float(v) / max(min(bucket, t_max - t), 1e-3)
            per[str(r.get(group))].append((mid(t), None if v is None else float(v)))
        return [Line(f"{g}{suffix}", pts, dashed) for g, pts in sorted(per.items())]

    ops = series.get("ops", [])
    fails: dict[float, float] = defaultdict(float)
    done: dict[str, int] = defaultdict(int)
    for r in ops:
        fails[float(r["t"])] += r.get("fail", 0) + r.get("info", 0)
        done[f"{r['f']} ok"] += int(r.get("ok", 0))
    throughput = lines(ops, "f", "ok", " ok", per_second=True)
    if any(fails.values()):
        fail_rows = [{"t": t, "f": "fail+info", "n": n} for t, n in sorted(fails.items())]
        throughput += lines(fail_rows, "f", "n", dashed=True, per_second=True)
        done["fail+info"] = int(sum(fails.values()))
    # Each line's legend says how many operations it draws: they add up to the header's.
    throughput = [Line(f"{ln.name} ({done[ln.name]:,})", ln.points, ln.dashed) for ln in throughput]
    latency = lines(series.get("latency", []), "f", "p50_ms", suffix=" p50") + lines(
        series.get("latency", []), "f", "p95_ms", suffix=" p95", dashed=True
    )
    lag = lines(series.get("lag", []), "store", "p50_ms", suffix=" p50") + lines(
        series.get("lag", []), "store", "max_ms", suffix=" max", dashed=True
    )
    class_of = {k: CLASSES.get(c, c) for c, kinds in KINDS.items() for k in kinds}
    by_class: dict[tuple[float, str], int] = defaultdict(int)
    for r in series.get("anomalies", []):
        by_class[(float(r["t"]), class_of.get(r["kind"], r["kind"]))] += int(r["count"])
    # Buckets without an anomaly count zero: a line must not bridge them.
    grid = [i * bucket for i in range(int(t_max // bucket) + 1)]
    classes = sorted({c for _, c in by_class})
    anomalies = lines(
        [{"t": t, "class": c, "count": by_class.get((t, c), 0)} for c in classes for t in grid],
        "class",
        "count",
    )
    specs = [
        ("throughput: operations completed per second", "ops/s", throughput),
        ("latency of operations (invoke to completion)", "ms", latency),
        (
            "replication lag per store (source ok to first effect; a write never seen "
            "there is not drawn)",
            "ms",
            lag,
        ),
        (
            "anomalies per bucket and class, at each one's time (a divergence: the final read)",
            "count",
            anomalies,
        ),
    ]
    return [
        render_chart(Chart(title, unit, t_max, ls, windows, marks)) for title, unit, ls in specs
    ]


def _consumers(
    series: dict[str, Any], duration: float, windows: list[Window]
) -> list[dict[str, Any]]:
    """Per consumer and channel: the highest offset delivered and the last processed per
    partition over time, and a per-partition table with the messages delivered again.
    A commit of offset N says that every offset below N is processed (Kafka commits the
    next offset to read): the last processed is N - 1, in the chart as in the table."""
    bucket = float(series.get("bucket_s") or 1)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in series.get("offsets", []):
        groups[(str(r["consumer"]), str(r["channel"]))].append(r)
    out = []
    for (consumer, channel), rows in sorted(groups.items())[:MAX_CONSUMER_CHARTS]:
        parts: dict[Any, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            parts[r.get("partition")].append(r)
        chart_lines: list[Line] = []
        table = []
        ordered = sorted(parts.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
        for i, (p, prow) in enumerate(ordered):
            name = "-" if p is None else str(p)
            delivered = [(r["t"] + bucket / 2, r.get("max_delivered")) for r in prow]
            committed = [
                (r["t"] + bucket / 2, None if c is None else c - 1)
                for r in prow
                for c in [r.get("max_committed")]
            ]
            color = PALETTE[i % len(PALETTE)]
            if any(v is not None for _, v in delivered):
                chart_lines.append(Line(f"p{name} delivered", _carry(delivered), color=color))
            if any(v is not None for _, v in committed):
                chart_lines.append(
                    Line(f"p{name} processed", _carry(committed), dashed=True, color=color)
                )
            table.append(
                {
                    "partition": name,
                    "max_delivered": max((v for _, v in delivered if v is not None), default=None),
                    "processed": max((v for _, v in committed if v is not None), default=None),
                    "redeliveries": sum(int(r.get("redeliveries") or 0) for r in prow),
                }
            )
        chart = None
        if chart_lines:
            chart = render_chart(
                Chart(
                    "offsets per partition (solid: highest delivered, dashed: last processed)",
                    "offset",
                    duration or bucket,
                    chart_lines,
                    windows,
                    height=200,
                )
            )
        out.append({"consumer": consumer, "channel": channel, "chart": chart, "partitions": table})
    return out


def _carry(points: list[tuple[float, Any]]) -> list[tuple[float, float | None]]:
    """Buckets without a delivery or commit keep the last value: offsets only advance
    in the chart when the consumer advanced."""
    out: list[tuple[float, float | None]] = []
    last: float | None = None
    for t, v in points:
        if v is not None:
            last = float(v)
        out.append((t, last))
    return out


def _files(folder: RunDir) -> list[dict[str, Any]]:
    """Relative links to the run's raw files, with sizes; a log says what it holds (an
    empty one is a service that logged nothing during the run: PostgreSQL, for one,
    logs only warnings and errors)."""
    paths = [folder.config, *folder.analysis_outputs, folder.parquet]
    for sub in (folder.history, folder.logs):
        if sub.is_dir():
            paths.extend(sorted(sub.iterdir()))
    out = []
    for p in paths:
        if not p.is_file():
            continue
        about = None
        if p.parent == folder.logs:
            held, empty = SERVICE_LOGS.get(p.name) or (
                f"what {p.stem} logged during the run",
                f"{p.stem} logged nothing during the run",
            )
            about = held if p.stat().st_size else f"empty: {empty}"
        out.append(
            {
                "href": p.relative_to(folder.path).as_posix(),
                "size": p.stat().st_size,
                "about": about,
            }
        )
    return out
