"""The suite starts Spark ahead of its first analysis (checkers.spark_start.warm_up)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.mark.spark
def test_warm_up_leaves_a_session_with_python_workers_for_the_analysis(tmp_path: Path) -> None:
    # In a process of its own: the session of this process is the tests' shared one.
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from pyspark.sql import SparkSession
        from checkers.analyze import analyze
        from checkers.spark_start import warm_up
        from harness.testing.synthetic import generate_history

        log = Path({str(tmp_path / "logs" / "spark.log")!r})
        warm_up(None, log).join(300)
        from pyspark import SparkContext
        sc = SparkContext._active_spark_context
        assert sc is not None, "no session after the warm-up"
        ids = {{s.jobId for s in map(sc.statusTracker().getJobInfo,
               sc.statusTracker().getJobIdsForGroup()) if s is not None}}
        assert len(ids) == 1, ids  # the workers' job ran
        run = Path({str(tmp_path / "run")!r})
        generate_history(run, events=2_000, seed=3)
        result = analyze(run)
        assert result.analysis["spark"]["master"] == sc.master
        assert SparkContext._active_spark_context is sc  # the same session, not a new one
        print("warm", log.exists())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warm True" in done.stdout
