"""The fault windows of a synthetic run and their `fault` events."""

from __future__ import annotations

from dataclasses import dataclass

from driftlab.harness.lab.testing.synthetic.blocks import Blocks


@dataclass(frozen=True, slots=True)
class Window:
    """One fault: what it is, where, and the times it starts and stops."""

    fault_id: str
    kind: str
    target: str
    start: int
    stop: int


def fault_windows(start: int, end: int) -> list[Window]:
    """Three fault windows spread over the workload, the second a consumer crash."""
    span = end - start
    specs = [("partition", "kafka-connect"), ("crash", "consumer:g1"), ("latency", "redis")]
    out = []
    for n, (kind, target) in enumerate(specs):
        t0 = start + span * (2 * n + 1) // 7
        out.append(Window(f"f{n + 1}", kind, target, t0, t0 + span // 10))
    return out


def fault_events(b: Blocks, windows: list[Window]) -> None:
    """The `start` and `stop` events of every window, by the nemesis."""
    for win in windows:
        for phase, t in (("start", win.start), ("stop", win.stop)):
            b.add(
                1,
                "nemesis",
                type="fault",
                time=t,
                phase=phase,
                kind=win.kind,
                target=win.target,
                fault_id=win.fault_id,
            )
