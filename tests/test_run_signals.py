"""The run's signal handler in this process: a signal is never lost, wherever the main
thread is when Python runs the handler."""

from __future__ import annotations

import gc
import os
import signal
import time

import pytest

from driftlab.harness.lab.runner.signals import RunSignals


class _SignalledWhileFinalized:
    """Its finalizer is where the handler runs: Python ignores what a finalizer raises."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)  # the handler runs here and its KeyboardInterrupt is swallowed


def test_a_signal_heard_inside_a_finalizer_still_interrupts() -> None:
    # Under CI's load a redis pool's __del__ once took a run's SIGINT in its report
    # phase; the run finished with its verdict, exit 1 instead of 130.
    signals = RunSignals(phase="report")
    with pytest.raises(KeyboardInterrupt), signals.installed():
        _SignalledWhileFinalized()
        gc.collect()
    assert signals.interrupted_in == "report" and signals.stop.is_set()


def test_a_first_signal_during_the_workload_only_stops_it() -> None:
    signals = RunSignals(phase="workload")
    with signals.installed():
        os.kill(os.getpid(), signal.SIGINT)
        assert signals.stop.wait(5)
    assert signals.interrupted_in == "workload"
