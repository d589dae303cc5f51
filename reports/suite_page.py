"""The suite page: runs/index.html, claim by claim, what the lab observed.

Built from the run folders under runs/ (config.json and analysis.json of each run), so
that it also shows the runs of earlier suites: the trend of each verdict across runs,
for nightly jobs. runs/index.json, written by `driftlab suite`, says which runs belong
to the latest suite; without it the newest run of each scenario is shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from driftlab.checkers.analysis_files import Analysis, OutputFileError, read_analysis
from driftlab.checkers.verdict import NOT_REPRODUCED, shown_verdict
from driftlab.harness.history.rundir import (
    REPORT_HTML,
    RunDir,
    RunsDir,
    RunSummary,
    read_json_object,
)
from driftlab.harness.lab.nemesis.schedule import FaultSpec
from driftlab.reports.claims import CLAIMS
from driftlab.reports.render import ReportError, write_html

MAX_TREND = 12
_STAMP = re.compile(r"^(\d{8}T\d{6}Z)-")
_CLAIM = re.compile(r"^(C\d+)(?:-(.+))?$", re.IGNORECASE)
"""A claim id, `C10`, or a scenario's variant of one, `C10-misaligned`: the other half of
the claim (the design without the guarantee, or the non-idempotent apply)."""
WORST_FIRST = (
    "unexpected anomaly",
    "not reproduced",
    "inconclusive",
    "error",
    "not judged",
    "not run",
    "no expectations",
    "reproduced",
    "held",
)
"""A claim's verdict is the first of these among its scenarios' verdicts."""


@dataclass(slots=True)
class RunInfo:
    """One run folder as the suite page sees it."""

    path: str  # relative to runs/
    scenario: str
    claim: str | None
    summary: str | None
    started: str
    verdict: str
    counts: dict[str, int] = field(default_factory=dict)
    expectations: dict[str, str] = field(default_factory=dict)
    report: str | None = None  # relative link, when report.html exists
    error: str | None = None
    inconclusive: list[str] = field(default_factory=list)  # what the run lacked
    untested: list[str] = field(default_factory=list)  # named kinds without a chance
    seed: int | None = None
    duration_s: float | None = None  # the workload's duration it ran
    faults: list[dict[str, Any]] | None = None  # the fault schedule it ran (config.json)

    @property
    def variant(self) -> str | None:
        """The matrix's fault schedule of a variant run (`<scenario>+none`), else None."""
        return self.scenario.split("+", 1)[1] if "+" in self.scenario else None


def render_index(index_json: str | Path) -> Path:
    """Hook of `driftlab suite`: the suite page of the folder holding index.json."""
    return render_suite(Path(index_json).parent)


def render_suite(runs_dir: str | Path) -> Path:
    """Write runs_dir/index.html from every run folder under it and return its path.

    Raises ReportError when runs_dir is not a folder.
    """
    runs = Path(runs_dir)
    if not runs.is_dir():
        raise ReportError(f"{runs} is not a folder of runs; pass the runs/ folder of a suite")
    return write_html(RunsDir(runs).index_html, "suite.html.j2", build_suite_context(runs))


def scan_runs(runs: Path) -> list[RunInfo]:
    """Every run folder runs/<scenario>/<run>/ with a config.json, oldest first."""
    found = []
    for config_path in sorted(runs.glob("*/*/config.json")):
        run = config_path.parent
        if run.parent.is_symlink() or run.is_symlink():
            continue
        found.append(_run_info(runs, run))
    return sorted(found, key=lambda r: (r.started, r.path))


def _run_info(runs: Path, run: Path) -> RunInfo:
    folder = RunDir(run)
    config = read_json_object(folder.config)
    analysis = _analysis(folder)
    summary = RunSummary.read(folder.summary) or RunSummary()
    params = config.get("params") or {}
    started = config.get("started_utc") or _stamp(run.name, run)
    verdict = analysis.verdict if analysis else "error" if summary.error else "not judged"
    expectations = dict(analysis.expectations if analysis else config.get("expectations") or {})
    return RunInfo(
        path=run.relative_to(runs).as_posix(),
        scenario=str(config.get("scenario") or run.parent.name),
        claim=config.get("claim") or params.get("claim"),
        summary=params.get("summary"),
        started=started,
        verdict=shown_verdict(verdict, expectations),
        counts=dict(analysis.counts) if analysis else {},
        expectations=expectations,
        report=f"{run.relative_to(runs).as_posix()}/{REPORT_HTML}"
        if folder.report.exists()
        else None,
        error=summary.error,
        inconclusive=list(analysis.inconclusive) if analysis else [],
        untested=list(analysis.untested) if analysis else [],
        seed=config.get("seed") if isinstance(config.get("seed"), int) else None,
        duration_s=_duration(params),
        faults=params.get("faults") if isinstance(params.get("faults"), list) else None,
    )


def _analysis(folder: RunDir) -> Analysis | None:
    """The run's analysis.json; None when there is none, or none this driftlab reads: the
    page then says the run was not analysed, with the command that analyses it again."""
    try:
        return read_analysis(folder.analysis)
    except (FileNotFoundError, OutputFileError):
        return None


def _duration(params: dict[str, Any]) -> float | None:
    """The workload's duration a run's config.json gives, None where it gives none."""
    workload = params.get("workload")
    value = workload.get("duration") if isinstance(workload, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _stamp(name: str, run: Path) -> str:
    """The run's start from its folder name (UTC stamp), else the folder's mtime."""
    m = _STAMP.match(name)
    if m:
        return datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").strftime("%Y-%m-%dT%H:%M:%SZ")
    return datetime.fromtimestamp(run.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def evidence_line(run: RunInfo) -> str:
    """One line of evidence: what was expected and found, what was forbidden and found,
    what was expected and missing."""
    if run.error and run.verdict in ("error", "not judged"):
        return f"run failed: {run.error}"
    if run.verdict == "not judged":
        return f"recorded, not analysed: driftlab analyze runs/{run.path}"
    if run.inconclusive:
        return "inconclusive, missing: " + "; ".join(run.inconclusive)
    if run.verdict == "lab failed":
        return run.error or "lab failed"
    found = [
        f"{k} {run.counts.get(k, 0)}"
        for k, w in run.expectations.items()
        if w == "present" and run.counts.get(k, 0)
    ]
    forbidden = [
        f"{k} {run.counts[k]}"
        for k, w in run.expectations.items()
        if w == "absent" and run.counts.get(k, 0)
    ]
    missing = [
        k for k, w in run.expectations.items() if w == "present" and not run.counts.get(k, 0)
    ]
    clean = [
        k
        for k, w in run.expectations.items()
        if w == "absent" and not run.counts.get(k, 0) and k not in run.untested
    ]
    parts = []
    if forbidden:
        parts.append("forbidden but found: " + _few(forbidden))
    if missing:
        parts.append("predicted but not found: " + _few(missing))
    if found:
        parts.append("found as predicted: " + _few(found))
    if clean:
        parts.append("none of " + _few(clean))
    if run.untested:
        parts.append("untested (no chance): " + _few(run.untested))
    if not parts:
        others = [f"{k} {n}" for k, n in run.counts.items() if n]
        parts.append("no expectations; observed: " + (", ".join(others) or "no anomaly"))
    return "; ".join(parts)


def _few(items: list[str], n: int = 5) -> str:
    """At most `n` items, then how many more: one line of evidence stays one line."""
    more = f" and {len(items) - n} more" if len(items) > n else ""
    return ", ".join(items[:n]) + more


def faults_text(faults: list[dict[str, Any]] | None) -> str | None:
    """The fault schedule a run ran, in one line (`no fault` for an empty one); None when
    its config.json does not say."""
    if faults is None:
        return None
    if not faults:
        return "no fault"
    return "; ".join(_fault_text(f) for f in faults)


def _fault_text(fault: dict[str, Any]) -> str:
    """One window of config.json in words (its moment too); as written when unreadable."""
    try:
        return FaultSpec.from_dict(fault).describe()
    except (KeyError, TypeError, ValueError):
        f = fault
        return f"{f.get('kind')} {f.get('target')} at {f.get('at')} s for {f.get('duration')} s"


def build_suite_context(runs: Path) -> dict[str, Any]:
    """Claims table rows (each claim with its scenarios), the matrix variants' rows, the
    other scenarios' rows and the suite's facts."""
    all_runs = scan_runs(runs)
    by_scenario: dict[str, list[RunInfo]] = {}
    for r in all_runs:
        by_scenario.setdefault(r.scenario, []).append(r)
    index = read_json_object(RunsDir(runs).index_json)
    in_suite = {e.get("run_dir") for e in index.get("runs", [])}

    def latest(scenario: str) -> RunInfo | None:
        runs_of = by_scenario.get(scenario, [])
        suite_runs = [r for r in runs_of if r.path in in_suite]
        return (suite_runs or runs_of or [None])[-1]

    def row(scenario: str, claim: str | None) -> dict[str, Any]:
        last = latest(scenario)
        history = by_scenario.get(scenario, [])
        finding = bool(last and last.variant and last.verdict == NOT_REPRODUCED)
        evidence = evidence_line(last) if last else "no run of this scenario yet"
        if finding:
            # The matrix fails a variant for a forbidden anomaly only (driftlab.harness.app.matrix).
            evidence += (
                "; a finding, not a failure: the prediction is for the scenario's own "
                "faults, and this variant ran another schedule"
            )
        return {
            "claim": claim,
            "scenario": scenario,
            "summary": (last.summary if last else None),
            "faults": faults_text(last.faults) if last else None,
            "last": last,
            "verdict": last.verdict if last else "not run",
            "finding": finding,
            "evidence": evidence,
            "trend": history[-MAX_TREND:],
            "n_runs": len(history),
        }

    groups = _claim_scenarios(all_runs)
    claims = []
    for claim_id, text in CLAIMS.items():
        rows = [row(scenario, variant_id) for variant_id, scenario in groups.get(claim_id, [])]
        if not rows:
            rows = [
                {
                    "claim": claim_id,
                    "scenario": None,
                    "summary": None,
                    "faults": None,
                    "last": None,
                    "verdict": "not run",
                    "finding": False,
                    "evidence": "no scenario has run yet",
                    "trend": [],
                    "n_runs": 0,
                }
            ]
        verdict = min((r["verdict"] for r in rows), key=_severity)
        claims.append({"claim": claim_id, "claim_text": text, "verdict": verdict, "rows": rows})
    used = {r["scenario"] for c in claims for r in c["rows"]}
    rest = [s for s in sorted(by_scenario) if s not in used]
    variants = [row(s, None) for s in rest if "+" in s]
    others = [row(s, None) for s in rest if "+" not in s]
    scenario_rows = [r for c in claims for r in c["rows"]]
    return {
        "claims": claims,
        "variants": variants,
        "others": others,
        "claim_tally": _tally(c["verdict"] for c in claims),
        "scenario_tally": _tally(r["verdict"] for r in scenario_rows),
        "other_tally": _tally(r["verdict"] for r in others),
        # Only the user's own scenarios or pipeline files ran (`suite --only a.toml`):
        # they lead the page, not a table of claims that were not run.
        "others_lead": bool(others) and all(r["last"] is None for r in scenario_rows),
        "n_claims": len(claims),
        "n_scenarios": len(scenario_rows),
        "n_runs": len(all_runs),
        # The page is rendered now; index.json says when the last suite or matrix ran.
        "generated": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "index_written": index.get("generated_utc"),
        "wall_s": index.get("wall_s"),
        # Written by `driftlab suite` or `driftlab matrix` (an index.json without the
        # field is a suite's: only the suite wrote one before).
        "index_of": index.get("written_by") or "suite",
    }


def _severity(verdict: str) -> int:
    return WORST_FIRST.index(verdict) if verdict in WORST_FIRST else 0


def _tally(verdicts: Any) -> dict[str, int]:
    """How many of each verdict, worst first."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v] = counts.get(v, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: _severity(kv[0])))


def _claim_scenarios(all_runs: list[RunInfo]) -> dict[str, list[tuple[str, str]]]:
    """Per claim of the table, its scenarios as (claim or variant id, scenario name): the
    claim's own first, then its variants (`C10-misaligned`); the registry's choice, else
    the newest run that names the claim or variant."""
    chosen: dict[str, str] = {}
    try:
        from driftlab.scenarios.catalogue.registry import claims_scenarios

        chosen = {sc.claim: sc.name for sc in claims_scenarios() if sc.claim}
    except (ImportError, KeyError, ValueError):
        chosen = {}
    for r in all_runs:
        if r.claim and r.claim not in chosen and not r.variant:
            chosen[r.claim] = r.scenario
    out: dict[str, list[tuple[str, str]]] = {}
    for claim, scenario in chosen.items():
        m = _CLAIM.match(claim)
        if m is None:
            continue
        base = m.group(1).upper()
        group = out.setdefault(base, [])
        group.insert(0 if m.group(2) is None else len(group), (claim, scenario))
    return out
