"""The direct-messaging setup on the real stack: claim C17 and its control case.

The producer POSTs every write to a receiver process; the receiver is SIGKILLed and
restarted by the nemesis.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from reference_counts import predicted, reference_anomalies, run_events

from driftlab.checkers.verdict import judge
from driftlab.harness.app.run import run_scenario
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.catalogue.registry import get_scenario

pytestmark = [pytest.mark.services, pytest.mark.slow]


def _run(stack: Stack, tmp_path: Path, name: str) -> tuple[Path, dict[str, int]]:
    sc = get_scenario(name).with_overrides(duration=5)
    result = run_scenario(sc, seed=2, runs_dir=tmp_path / "runs", stack=stack, analyze=False)
    assert result.error is None and result.quiesced and not result.fault_errors
    anomalies = reference_anomalies(result.run_dir)
    counts = Counter(a.kind for a in anomalies)
    verdict = judge(counts, sc.expectations)
    assert verdict.verdict == predicted(sc.expectations), (verdict, counts, str(result.run_dir))
    return result.run_dir, counts


def test_c17_messages_sent_while_the_consumer_is_down_are_lost(
    stack: Stack, tmp_path: Path
) -> None:
    run_dir, _ = _run(stack, tmp_path, "C17")
    events = run_events(run_dir)
    window = [e.time for e in events if e.type == "fault" and e.kind == "crash"]
    assert len(window) == 2
    refused = [
        e
        for e in events
        if e.type == "op" and e.phase == "fail" and e.f == "write" and window[0] <= e.time
    ]
    assert refused, "no send was refused while the receiver was down"
    delivered = {e.msg_id for e in events if e.type == "msg" and e.action == "deliver"}
    lost = [a for a in reference_anomalies(run_dir) if a.kind == "lost-message"]
    # What is lost is exactly what the receiver never got, and only that.
    produced = {e.msg_id for e in events if e.type == "msg" and e.action == "produce"}
    assert len(lost) == len(produced - delivered)
    # The kill was real: the first instance received nothing once the window opened.
    first = [e.time for e in events if e.action == "deliver" and e.process == "receiver-i1"]
    assert first and max(first) < window[0]


def test_a_producer_that_retries_past_the_outage_loses_nothing(
    stack: Stack, tmp_path: Path
) -> None:
    _, counts = _run(stack, tmp_path, "direct-messaging-retry")
    assert counts.get("lost-message", 0) == 0
