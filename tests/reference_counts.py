"""Judging a run with the reference checkers (imported by scenario tests, not a plugin).

The plain-Python checkers are the specification the Spark jobs are kept in agreement
with (tests/test_checkers_*.py); on short runs they judge in a second where a Spark
session would take much longer on a shared CI machine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from driftlab.checkers.anomaly import Anomaly
from driftlab.checkers.coverage import chances
from driftlab.checkers.reference import CHECKERS
from driftlab.checkers.run_facts import summary_facts
from driftlab.checkers.series import COMPLETIONS
from driftlab.checkers.verdict import PRESENT, Verdict, decide, judge
from driftlab.harness.history.reader import read_history
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.history.schema import Event, EventType


def run_events(run_dir: Path) -> list[Event]:
    """Every event of a run's history."""
    return [Event(**row) for row in read_history(run_dir).table.to_pylist()]


def reference_anomalies(run_dir: Path) -> list[Anomaly]:
    """Every anomaly the reference checkers find in a run's history."""
    events = run_events(run_dir)
    found: list[Anomaly] = []
    for module in CHECKERS.values():
        found += module.check(events)
    return found


def reference_counts(run_dir: Path) -> dict[str, int]:
    """Anomaly counts by kind, as analysis.json has them."""
    return dict(Counter(a.kind for a in reference_anomalies(run_dir)))


def reference_verdict(
    run_dir: Path, expectations: dict[str, str] | None = None
) -> tuple[Verdict, dict[str, int]]:
    """The verdict of a run judged by the reference checkers and driftlab.checkers.coverage
    (config.json's expectations unless `expectations`), and each kind's chances."""
    events = run_events(run_dir)
    config = RunDir(run_dir).read_config()
    found = chances(events)
    recorded = summary_facts(RunDir(run_dir))
    facts = replace(
        recorded,
        ran=any(e.type == EventType.OP and e.phase in COMPLETIONS for e in events),
        unreadable=[*(config.get("unreadable") or []), *recorded.unreadable],
    )
    if expectations is None:
        expectations = config.get("expectations") or {}
    return decide(reference_counts(run_dir), found, expectations, facts), found


def predicted(expectations: Mapping[str, str]) -> str:
    """The verdict of a run that behaves as `expectations` predict (every kind expected
    present found, none expected absent): `held` when all are absent, else
    `reproduced`."""
    return judge({k: 1 for k, v in expectations.items() if v == PRESENT}, expectations).verdict
