"""The work-queue setup on the real stack: claim C7 as a short run.

RabbitMQ, three consumer processes with manual acks and a prefetch window, Redis
written without a version check; two consumers are SIGKILLed mid-run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_counts import predicted, reference_counts, run_events

from driftlab.checkers.verdict import judge
from driftlab.harness.app.run import run_scenario
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.setups.base import SetupContext
from driftlab.scenarios.architectures.work_queue.setup import WorkQueue
from driftlab.scenarios.catalogue.registry import get_scenario


@pytest.mark.services
@pytest.mark.slow
def test_c7_consumer_crash_redelivers_out_of_order(stack: Stack, tmp_path: Path) -> None:
    # The scenario's own 10 s: on a loaded machine a shorter run may keep one crash only.
    sc = get_scenario("C7")
    result = run_scenario(sc, seed=11, runs_dir=tmp_path / "runs", stack=stack, analyze=False)
    assert result.error is None and result.quiesced and not result.fault_errors
    counts = reference_counts(result.run_dir)
    verdict = judge(counts, sc.expectations)
    assert verdict.verdict == predicted(sc.expectations), (verdict, counts, str(result.run_dir))

    events = run_events(result.run_dir)
    delivers = [e for e in events if e.type == "msg" and e.action == "deliver"]
    # The crash started a new instance of the worker (on a loaded machine the second
    # window may find the first one's restart still running, and be skipped).
    instances = {e.process for e in delivers}
    assert "worker-0-i2" in instances, instances
    # The broker flagged the messages it gave out again after a crash.
    assert any('"redelivered":true' in (e.extra or "") for e in delivers)
    # Every message was acked once it was applied: at-least-once, nothing left behind.
    produced = {e.msg_id for e in events if e.type == "msg" and e.action == "produce"}
    acked = {e.msg_id for e in events if e.type == "msg" and e.action == "ack"}
    assert produced and produced <= acked


def test_bad_parameters_name_the_fix(tmp_path: Path) -> None:
    ctx = SetupContext("dl_wq_bad", None, None, tmp_path, params={"workers": 0})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="workers and prefetch must be >= 1"):
        WorkQueue().prepare(ctx)
