"""Ctrl-C (or SIGTERM) during an analysis stops it at once with exit 130, one line of
ours, and the history as it was (the first SIGINT used to be swallowed, and the run
ended "reproduced"; PySpark's "Unable to cleanly shutdown Spark JVM" warning came first)."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import DRIFTLAB, await_while_running

from driftlab.checkers.analyze import SCRATCH
from driftlab.harness.lab.testing.synthetic import generate_history


def _digests(run: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((run / "history").glob("*.jsonl"))
    }


def _spark_starting(run: Path) -> bool:
    # The log's first line is written before the JVM starts, which takes seconds.
    log = run / "logs" / "analyze.log"
    return log.exists() and "analysing" in log.read_text()


@pytest.mark.spark
@pytest.mark.parametrize(
    "when",
    [
        # Its scratch folder appears once Spark is up, just before the pass's one job.
        lambda run: (run / SCRATCH).exists(),
        # While the JVM starts, PySpark once had its own SIGINT handler in place.
        _spark_starting,
    ],
    ids=["in the pass", "while Spark starts"],
)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_analysis_exits_130_with_one_line_and_the_history_intact(
    tmp_path: Path, when: Callable[[Path], bool], sig: signal.Signals
) -> None:
    run = tmp_path / "run"
    generate_history(run, events=100_000, seed=4, jsonl=True)
    before = _digests(run)
    proc = subprocess.Popen(
        [DRIFTLAB, "analyze", str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not when(run):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert err.strip() == f"error: interrupted; the history in {run} is intact", err
    assert "Traceback" not in out + err
    assert _digests(run) == before
    # Stopped, not finished: the analysis never reached its outputs.
    assert not (run / "analysis.json").exists()


def test_interruptible_raises_and_restores_the_handlers() -> None:
    # In a process of its own: the handler stops this process's SparkContext, which the
    # other tests of the session share.
    code = textwrap.dedent(
        """
        import signal, time
        from driftlab.checkers.session import interruptible
        old = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        try:
            with interruptible():
                assert signal.getsignal(signal.SIGINT) not in old
                signal.raise_signal(signal.SIGTERM)
                time.sleep(5)
        except KeyboardInterrupt:
            pass
        else:
            raise SystemExit("no KeyboardInterrupt")
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == old
        print("restored")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and "restored" in done.stdout, done.stderr


@pytest.mark.services
@pytest.mark.spark
@pytest.mark.slow
def test_sigint_during_the_analysis_of_a_run_exits_130(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # cwd in tmp_path: no `driftlab up` stack to reuse, so the run starts its own.
    proc = subprocess.Popen(
        [DRIFTLAB, "run", "C1", "--duration", "3s", "--runs-dir", str(runs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        await_while_running(proc, lambda: bool(list(runs.glob(f"*/*/{SCRATCH}"))), "analysis")
        run = next(runs.glob(f"*/*/{SCRATCH}")).parent
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    said = " ".join((out + err).split())
    assert proc.returncode == 130, said
    assert "interrupted during the analysis; the history is complete" in said
    assert "Traceback" not in said
    assert not (run / "analysis.json").exists()
    history = "".join(p.read_text() for p in (run / "history").glob("*.jsonl"))
    assert '"kind":"end"' in history  # the run itself had finished and closed its history


def test_an_error_raised_over_the_interrupt_is_still_the_interrupt() -> None:
    # PySpark's cleanup of a call the interrupt cut short raises over it (its context is
    # stopped by then); the analysis must still end as interrupted, not as failed.
    code = textwrap.dedent(
        """
        import signal
        from driftlab.checkers.session import interruptible
        try:
            with interruptible():
                try:
                    signal.raise_signal(signal.SIGINT)
                except KeyboardInterrupt:
                    raise AttributeError("'NoneType' object has no attribute 'setCallSite'")
        except KeyboardInterrupt as e:
            print("interrupted", type(e.__cause__).__name__)
        try:
            with interruptible():
                raise AttributeError("no interrupt")
        except AttributeError:
            print("failed")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.split("\n")[:2] == ["interrupted AttributeError", "failed"], done.stderr


def test_an_interrupt_inside_a_finalizer_is_raised_on_leaving_without_a_traceback() -> None:
    # py4j frees Java objects from weakref callbacks; a signal handled inside one raises
    # where Python can only print the exception as "ignored" and drop it.
    code = textwrap.dedent(
        """
        import os, signal, weakref
        from driftlab.checkers.session import interruptible

        class Handle:
            pass

        def free():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(100_000):  # the handler runs between these bytecodes
                pass

        try:
            with interruptible():
                handle = Handle()
                keep = weakref.ref(handle, lambda _ref: free())
                del handle
                print("went on")
        except KeyboardInterrupt:
            print("interrupted")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.split() == ["went", "on", "interrupted"], done.stderr
    assert "Traceback" not in done.stderr and "ignored" not in done.stderr, done.stderr
