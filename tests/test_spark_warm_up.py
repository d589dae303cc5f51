"""The suite starts Spark ahead of its first analysis (driftlab.checkers.spark_start.warm_up)."""

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
        from driftlab.checkers.analyze import analyze
        from driftlab.checkers.spark_start import warm_up
        from driftlab.harness.lab.testing.synthetic import generate_history

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
        assert result.analysis.spark.master == sc.master
        assert SparkContext._active_spark_context is sc  # the same session, not a new one
        print("warm", log.exists())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warm True" in done.stdout


@pytest.mark.spark
def test_the_jvm_log_takes_spark_lines_and_no_line_of_the_process(tmp_path: Path) -> None:
    # The JVM once got its log by a redirect of the whole process's stderr while it
    # started: a run's error message printed meanwhile went to a log on a full disk, and
    # `driftlab run` exited 3 having said nothing.
    log = tmp_path / "spark.log"
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from driftlab.checkers.spark_start import warm_up

        starting = warm_up(None, Path({str(log)!r}))
        i = 0
        while starting.is_alive():
            print(f"the run says {{i}}", file=sys.stderr, flush=True)
            i += 1
            time.sleep(0.05)
        print("said", i)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = int(done.stdout.split()[-1])
    assert said > 0
    assert done.stderr.count("the run says") == said
    text = log.read_text()
    assert "the run says" not in text
    assert "log4j" in text  # Spark's own start-up lines
