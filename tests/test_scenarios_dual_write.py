"""Claims C1, C2 and C13 (and C1's control case) reach their verdicts on the real stack.

Short runs (4 s of workload each) analysed by the Spark checkers: the verdict compares
the anomaly counts with the scenario's expectations (docs/checkers.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_counts import predicted

from driftlab.harness.app.run import run_scenario
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.catalogue.registry import get_scenario

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("name", ["C1", "dual-write-sequential", "C2", "C13"])
def test_claim_verdict(name: str, stack: Stack, spark: object, tmp_path: Path) -> None:
    sc = get_scenario(name).with_overrides(duration=4)
    result = run_scenario(sc, seed=1, runs_dir=tmp_path / "runs", stack=stack)
    assert result.error is None
    assert result.verdict == predicted(sc.expectations), (
        result.verdict,
        result.counts,
        sc.expectations,
    )
    assert result.exit_code == exitcodes.OK
    for kind, want in sc.expectations.items():
        assert (result.counts.get(kind, 0) > 0) == (want == "present"), kind
