"""`driftlab analyze` shows that it works: a large history's pass takes minutes."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from driftlab.checkers.session import task_progress
from driftlab.harness.cli.analyze import _shown


@pytest.mark.spark
def test_the_analysis_line_counts_the_tasks_of_the_running_job(spark) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    assert task_progress() is None  # no job runs
    with _shown(console, remote=False):
        # Four tasks of 1.5 s on at most two cores: the line is redrawn every 0.5 s.
        spark.sparkContext.parallelize(range(4), 4).map(lambda x: time.sleep(1.5) or x).count()
    assert re.search(r"analysing: Spark tasks [0-4]/4", out.getvalue())
    assert task_progress() is None


def test_a_checker_line_counts_one_anomaly_in_the_singular() -> None:
    from driftlab.checkers.analyze import CheckerRun, _say_checker

    lines: list[str] = []
    _say_checker(lines.append, CheckerRun("graph", counts={"contradictory-order": 1}))
    _say_checker(lines.append, CheckerRun("reorder", counts={"stale-overwrite": 4753}))
    _say_checker(lines.append, CheckerRun("lost", counts={}))
    assert lines[0].endswith(" 1 anomaly[/]")
    assert lines[1].endswith("4,753 anomalies[/]") and lines[2].endswith(" 0 anomalies[/]")
