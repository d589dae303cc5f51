"""The product as a user runs it: the installed `driftlab` console script, from a fresh
working directory, with every option at its default (relative `runs/`, its own stack).

The rest of the suite hands absolute temporary folders to the runner, which once hid
that every CDC scenario crashed for a user typing `make demo` in a fresh clone: the
consumer process ran in the run folder and was handed the relative path `runs/...`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_support import assert_reproduced, driftlab

# One claim per setup family: dual-write, cdc, outbox, compaction, snapshot,
# bounded-log, work-queue, event-sourced, direct messaging, acked produce.
FAMILIES = ["C1", "C3", "C6", "C7", "C9", "C10", "C11", "C14", "C16", "C17"]

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]


def _failure(proc: subprocess.CompletedProcess[str], index: dict | None = None) -> str:
    errors = [
        f"{r['claim']} {r['scenario']}: {r['verdict'] or 'no verdict'}"
        f" (exit {r['exit_code']}): {r['error'] or r['counts']}"
        for r in (index or {}).get("runs", [])
        if r["exit_code"] != 0
    ]
    tails = ["--- stdout", proc.stdout[-4000:], "--- stderr", proc.stderr[-4000:]]
    return "\n".join([*errors, *tails])


@pytest.mark.timeout(1800)
def test_suite_from_a_fresh_directory_reproduces_every_setup_family(tmp_path: Path) -> None:
    """`driftlab suite --only ...` with default options reproduces each claim's
    prediction and writes the suite page and every run's report under ./runs."""
    proc = driftlab(tmp_path, "suite", "--only", ",".join(FAMILIES), timeout=1700)
    index_json = tmp_path / "runs" / "index.json"
    index = json.loads(index_json.read_text()) if index_json.exists() else None
    assert proc.returncode == 0, _failure(proc, index)
    assert index is not None, _failure(proc)
    assert (tmp_path / "runs" / "index.html").is_file()
    assert_reproduced(index, FAMILIES, _failure(proc, index))
    for r in index["runs"]:
        run_dir = tmp_path / "runs" / r["run_dir"]
        assert (run_dir / "report.html").is_file(), run_dir
    # The suite's own stack is gone with it: nothing left to reuse or leak.
    assert not (tmp_path / ".driftlab").exists() or not any(
        (tmp_path / ".driftlab").rglob("stack.json")
    )


def test_run_of_a_cdc_scenario_with_defaults(tmp_path: Path) -> None:
    """`driftlab run C4` from a fresh directory: the planted commit-before-apply bug is
    caught (exit 0, "reproduced"), and runs/latest holds its report."""
    proc = driftlab(tmp_path, "run", "C4", timeout=600)
    latest = tmp_path / "runs" / "latest"
    summary_path = latest / "logs" / "run.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    detail = f"{summary.get('error')}\n{_failure(proc)}"
    assert proc.returncode == 0, detail
    assert summary.get("verdict") == "reproduced", detail
    assert (latest / "report.html").is_file()
