"""Whole analysis.json and examples.json contents for tests that write a run folder by
hand: the fields a test names, the rest as the analysis of an empty history writes them,
checked against driftlab.checkers.analysis_files so that a test never writes a file no analysis
would."""

from __future__ import annotations

from typing import Any

from driftlab.checkers.analysis_files import ANALYSIS_SCHEMA, Analysis, Examples
from driftlab.checkers.outputs import CHECKER_OF

EMPTY_HISTORY = {
    "events": 0,
    "segments": 1,
    "complete": True,
    "cut_short": False,
    "dropped_partial_lines": 0,
    "t0_ns": 0,
    "t1_ns": 0,
}


def analysis_json(**fields: Any) -> dict[str, Any]:
    """analysis.json with `fields` (`history` names only the entries it changes)."""
    history = EMPTY_HISTORY | fields.pop("history", {})
    timings = dict.fromkeys(("convert_s", "checkers_s", "outputs_s", "total_s"), 0.0)
    whole: dict[str, Any] = {
        "schema": ANALYSIS_SCHEMA,
        "run": {"run_dir": "runs/x/y", "scenario": None, "seed": None},
        "history": history,
        "counts": {},
        "coverage": {},
        "counts_by_checker": {},
        "notes": {},
        "lost_where": {},
        "lag": {},
        "realtime_lag": {"partitions": 0, "worst": None},
        "expectations": {},
        "verdict": "no expectations",
        "forbidden_found": [],
        "expected_missing": [],
        "reasons": [],
        "inconclusive": [],
        "untested": [],
        "caveats": [],
        "lab_failures": [],
        "checkers": {},
        "timings": timings,
        "spark": {"master": "local[1]", "version": "4.1.1"},
    }
    assert set(fields) <= set(whole), set(fields) - set(whole)
    return Analysis.model_validate(whole | fields).model_dump(mode="json", by_alias=True)


def examples_json(kinds: dict[str, list[dict[str, Any]]], per_kind: int = 5) -> dict[str, Any]:
    """examples.json whose kinds hold these example rows (the fields a row leaves out
    are null, its evidence empty), each kind counting its rows."""
    empty = dict.fromkeys(("store", "key", "consumer", "time_ns", "t", "detail")) | {"evidence": []}
    data = {
        "schema": ANALYSIS_SCHEMA,
        "per_kind": per_kind,
        "kinds": {
            kind: {
                "checker": CHECKER_OF[kind],
                "count": len(rows),
                "examples": [empty | row for row in rows],
            }
            for kind, rows in kinds.items()
        },
    }
    return Examples.model_validate(data).model_dump(mode="json", by_alias=True)
