"""The run report: RUN_DIR/report.html, built from the analysis outputs of the run.

Reads config.json, analysis.json, examples.json, series.json and logs/run.json
(docs/analysis.md), plus the events of the few keys drawn as sequence diagrams from
history.parquet. Never loads the whole history: the report's size and cost do not
grow with the run.
"""

from __future__ import annotations

import platform
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from checkers.anomaly import KINDS
from checkers.kinds import BY_NAME
from checkers.reference.lost import where_lost
from checkers.verdict import LAB_FAILED
from harness import __version__
from harness.history.schema import LOG_AUDIT
from harness.rundir import NotAJsonObject, RunDir, strict_json_object
from reports.plots import PALETTE, Chart, Line, Window, render_chart
from reports.render import ReportError, write_html
from reports.sequence import diagrams_for_run

CLASSES: dict[str, str] = {
    "lost": "lost",
    "duplicates": "duplicate",
    "reorder": "reorder",
    "divergence": "divergence",
    "staleness": "stale read",
    "eventsourcing": "invariant violation",
    "graph": "contradictory order",
}
"""Anomaly classes of the summary, one per checker of checkers.anomaly.KINDS."""

MAX_CONSUMER_CHARTS = 12


def _load_json(path: Path, required: bool) -> dict[str, Any]:
    try:
        return strict_json_object(path)
    except FileNotFoundError:
        if required:
            raise ReportError(
                f"{path} is missing; run `driftlab analyze {path.parent}` first"
            ) from None
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
    config = _load_json(folder.config, required=False)
    analysis = _load_json(folder.analysis, required=True)
    examples = _load_json(folder.examples, required=False)
    series = _load_json(folder.series, required=False)
    summary = _load_json(folder.summary, required=False)
    history = analysis.get("history", {})
    t0 = int(history.get("t0_ns") or series.get("t0_ns") or 0)
    t1 = int(history.get("t1_ns") or series.get("t1_ns") or t0)
    duration = max((t1 - t0) / 1e9, 0.0)
    windows = [
        Window(f"{f.get('kind')} {f.get('target')}", float(f["start"]), f.get("stop"))
        for f in series.get("faults", [])
    ]
    marks = [(float(m["t"]), str(m["kind"])) for m in series.get("marks", [])]
    params = config.get("params", {})
    return {
        "run_name": f"{run.parent.name}/{run.name}",
        "scenario": config.get("scenario") or analysis.get("run", {}).get("scenario"),
        "claim": config.get("claim") or params.get("claim"),
        "summary_text": params.get("summary"),
        "setup": params.get("setup"),
        "setup_params": params.get("setup_params") or {},
        "workload": params.get("workload") or {},
        "fault_schedule": params.get("faults") or [],
        "seed": config.get("seed", analysis.get("run", {}).get("seed")),
        "started": config.get("started_utc")
        or (datetime.fromtimestamp(t0 / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t0 else None),
        "duration_s": duration,
        "history": history,
        "versions": _versions(config, analysis),
        "verdict": analysis.get("verdict", "not judged"),
        "inconclusive": analysis.get("inconclusive") or [],
        "lab_failed": analysis.get("reasons") or []
        if analysis.get("verdict") == LAB_FAILED
        else [],
        "verdict_rows": _verdict_rows(analysis),
        "forbidden_found": analysis.get("forbidden_found", []),
        "expected_missing": analysis.get("expected_missing", []),
        "checkers": analysis.get("checkers", {}),
        "incomplete": [n for n, c in analysis.get("checkers", {}).items() if c["status"] != "ok"],
        "notes": analysis.get("notes", {}),
        "lost_where": {
            k: w for k, w in (analysis.get("lost_where") or {}).items() if any(w.values())
        },
        "lag": analysis.get("lag", {}),
        "realtime_lag": (analysis.get("realtime_lag") or {}).get("worst"),
        "runner": summary,
        "classes": _classes(analysis, examples, t0),
        "foreign": _foreign_names(config),
        "diagrams": diagrams_for_run(folder, examples, t0) if examples else [],
        "charts": _charts(series, duration, windows, marks),
        "faults": series.get("faults", []),
        "consumers": _consumers(series, duration, windows),
        "files": _files(folder),
    }


def _versions(config: dict[str, Any], analysis: dict[str, Any]) -> dict[str, str]:
    """Component versions: what the runner recorded, then the analysis' own."""
    versions = {str(k): str(v) for k, v in (config.get("versions") or {}).items()}
    versions.setdefault("driftlab", __version__)
    spark = analysis.get("spark", {})
    if spark.get("version"):
        versions.setdefault("spark", f"{spark['version']} ({spark.get('master', '?')})")
    if "python" not in versions:
        versions["python (report)"] = platform.python_version()
    return versions


def _verdict_rows(analysis: dict[str, Any]) -> list[dict[str, Any]]:
    """Expected against observed, one row per expectation."""
    counts = analysis.get("counts", {})
    coverage = analysis.get("coverage") or {}
    rows = []
    for kind, want in analysis.get("expectations", {}).items():
        n = int(counts.get(kind, 0))
        chances = coverage.get(kind)
        met = (n > 0) if want == "present" else (n == 0 and chances != 0)
        rows.append({"kind": kind, "expected": want, "observed": n, "met": met, "chances": chances})
    return rows


def _classes(analysis: dict[str, Any], examples: dict[str, Any], t0: int) -> list[dict[str, Any]]:
    """Per anomaly class: its kinds with counts, expectation and sampled examples."""
    counts = analysis.get("counts", {})
    expectations = analysis.get("expectations", {})
    ex_kinds = examples.get("kinds", {})
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
            ex = ex_kinds.get(kind, {})
            known_kind = BY_NAME.get(kind)
            rows.append(
                {
                    "kind": kind,
                    "label": known_kind.label if known_kind else kind,
                    "chance_is": known_kind.chance if known_kind else "",
                    "chances": (analysis.get("coverage") or {}).get(kind),
                    "count": int(counts.get(kind, 0)),
                    "expected": expectations.get(kind),
                    "examples": [_example(e, t0) for e in ex.get("examples", [])],
                }
            )
        total = sum(r["count"] for r in rows)
        status = analysis.get("checkers", {}).get(checker, {}).get("status", "ok")
        out.append(
            {"checker": checker, "label": label, "total": total, "kinds": rows, "status": status}
        )
    return out


def _foreign_names(config: dict[str, Any]) -> dict[str, Any] | None:
    """For a history imported from another tool (config.json `foreign_names`, written by
    harness/importers): that tool's name and its names of driftlab's kinds."""
    names = config.get("foreign_names")
    if not isinstance(names, dict) or not isinstance(names.get("kinds"), dict):
        return None
    return {"tool": str(names.get("tool", "source")), "kinds": names["kinds"]}


def _example(ex: dict[str, Any], t0: int) -> dict[str, Any]:
    return {
        "t": ex.get("t"),
        "store": ex.get("store"),
        "key": ex.get("key"),
        "consumer": ex.get("consumer"),
        "detail": ex.get("detail", ""),
        "log": where_lost(ex.get("detail") or ""),
        "evidence": [_evidence_line(e, t0) for e in ex.get("evidence", [])],
    }


def _evidence_line(e: dict[str, Any], t0: int) -> str:
    """One history event as a short line: when (seconds since the run's start), type,
    who, what, where."""
    when = f"{(int(e['time']) - t0) / 1e9:.6f}s" if e.get("time") is not None else "?"
    parts = [when, str(e.get("type", "?"))]
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
    for r in ops:
        fails[float(r["t"])] += r.get("fail", 0) + r.get("info", 0)
    throughput = lines(ops, "f", "ok", " ok", per_second=True)
    if any(fails.values()):
        fail_rows = [{"t": t, "f": "fail+info", "n": n} for t, n in sorted(fails.items())]
        throughput += lines(fail_rows, "f", "n", dashed=True, per_second=True)
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
        ("throughput", "ops/s", throughput),
        ("latency (invoke to completion)", "ms", latency),
        ("replication lag per store (source ok to first effect)", "ms", lag),
        ("anomalies per bucket and class, at the time of the anomaly", "count", anomalies),
    ]
    return [
        render_chart(Chart(title, unit, t_max, ls, windows, marks)) for title, unit, ls in specs
    ]


def _consumers(
    series: dict[str, Any], duration: float, windows: list[Window]
) -> list[dict[str, Any]]:
    """Per consumer and channel: offsets delivered and committed per partition over time,
    and a per-partition table with redeliveries."""
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
            committed = [(r["t"] + bucket / 2, r.get("max_committed")) for r in prow]
            color = PALETTE[i % len(PALETTE)]
            if any(v is not None for _, v in delivered):
                chart_lines.append(Line(f"p{name} delivered", _carry(delivered), color=color))
            if any(v is not None for _, v in committed):
                chart_lines.append(
                    Line(f"p{name} committed", _carry(committed), dashed=True, color=color)
                )
            table.append(
                {
                    "partition": name,
                    "max_delivered": max((v for _, v in delivered if v is not None), default=None),
                    "max_committed": max((v for _, v in committed if v is not None), default=None),
                    "redeliveries": sum(int(r.get("redeliveries") or 0) for r in prow),
                }
            )
        chart = None
        if chart_lines:
            chart = render_chart(
                Chart(
                    "offsets per partition (solid: delivered, dashed: committed)",
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
    """Relative links to the run's raw files, with sizes."""
    paths = [folder.config, *folder.analysis_outputs, folder.parquet]
    for sub in (folder.history, folder.logs):
        if sub.is_dir():
            paths.extend(sorted(sub.iterdir()))
    return [
        {"href": p.relative_to(folder.path).as_posix(), "size": p.stat().st_size}
        for p in paths
        if p.is_file()
    ]
