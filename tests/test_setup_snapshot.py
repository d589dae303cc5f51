"""Claim C10 on real PostgreSQL, Debezium and Kafka: a view loaded from Debezium's
initial snapshot converges when it streams from the snapshot's position, and loses the
changes in between when it streams from the log's end (the planted variant)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_counts import predicted, reference_counts, run_events

from driftlab.checkers.verdict import judge
from driftlab.harness.app.run import run_scenario
from driftlab.harness.history.schema import LOG_AUDIT, SOURCE_STORE
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.architectures.snapshot.setup import VIEW
from driftlab.scenarios.catalogue.registry import get_scenario

pytestmark = [pytest.mark.services, pytest.mark.slow]


@pytest.mark.parametrize("name", ["C10", "C10-misaligned"])
def test_snapshot_then_stream_verdict(name: str, stack: Stack, tmp_path: Path) -> None:
    sc = get_scenario(name).with_overrides(duration=5)
    result = run_scenario(sc, seed=1, runs_dir=tmp_path / "runs", stack=stack, analyze=False)
    assert result.error is None and result.quiesced
    counts = reference_counts(result.run_dir)
    assert judge(counts, sc.expectations).verdict == predicted(sc.expectations), counts
    events = run_events(result.run_dir)
    states: dict[str, dict[str, str | None]] = {SOURCE_STORE: {}, VIEW: {}}
    for e in events:
        if e.type == "state" and e.key is not None:
            states[e.store or ""][e.key] = e.value
    marks = [e for e in events if e.type == "mark" and e.kind == "consumer-done"]
    # The view's own mark, and the log audit's (the topic read back after quiescence).
    (done,) = [e for e in marks if e.consumer != LOG_AUDIT]
    assert [e.consumer for e in marks if e.consumer == LOG_AUDIT] == [LOG_AUDIT]
    figures = json.loads(done.extra or "{}")
    if sc.setup_params["align"]:
        assert states[VIEW] == states[SOURCE_STORE]
        assert "jumped_to" not in figures
    else:
        assert figures["jumped_to"] > figures["jumped_from"]
        differ = {k for k, v in states[SOURCE_STORE].items() if states[VIEW].get(k) != v}
        assert differ
        # The view kept the snapshot's (the loader's) value of those keys.
        assert all((states[VIEW][k] or "").startswith("loader-") for k in differ)
