"""Fault schedules: parsing, scaling with the run, clipping before recovery, periodic."""

from __future__ import annotations

import pytest

from driftlab.harness.lab.nemesis.schedule import FaultSpec, Schedule, periodic
from driftlab.harness.lab.scenario import faults


def test_from_dict_puts_extra_fields_in_params() -> None:
    f = FaultSpec.from_dict(
        {"kind": "latency", "target": "redis", "at": 1, "duration": 2, "ms": 50}
    )
    assert (f.kind, f.target, f.at, f.until) == ("latency", "redis", 1.0, 3.0)
    assert f.params == {"ms": 50}


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ({"kind": "meteor", "target": "x", "at": 0}, "unknown"),
        ({"kind": "crash", "target": "redis"}, "lacks 'at'"),
        ({"kind": "crash", "target": "redis", "at": -1}, ">= 0"),
        ({"kind": "pause", "target": "redis", "at": 1, "when": "busy"}, "only a crash"),
        ({"kind": "crash", "target": "redis", "at": 1, "when": "idle"}, "when: busy"),
    ],
)
def test_bad_windows_are_named(window: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FaultSpec.from_dict(window)


def test_scaled_and_fitted_keep_faults_out_of_the_recovery_window() -> None:
    s = faults(
        {"kind": "crash", "target": "redis", "at": 2, "duration": 4},
        {"kind": "cut", "target": "postgres", "at": 9, "duration": 1},
        recovery=2.0,
    )
    half = s.scaled(0.5)
    assert [(f.at, f.duration) for f in half.faults] == [(1.0, 2.0), (4.5, 0.5)]
    fitted = s.fitted(7.0)  # faults must close by 5 s
    assert [(f.kind, f.at, f.until) for f in fitted.faults] == [("crash", 2.0, 5.0)]


def test_periodic_composes_with_plus() -> None:
    a = periodic("pause", "redis", start=1, every=2, duration=0.5, until=6)
    b = Schedule((FaultSpec("cut", "postgres", 1.2, 1.0),), recovery=3.0)
    both = a + b
    assert [f.at for f in a.faults] == [1, 3, 5]
    assert len(both.faults) == 4 and both.recovery == 3.0
    # Overlapping windows are allowed: the cut opens while the first pause is open.
    assert both.faults[3].at < both.faults[0].until
