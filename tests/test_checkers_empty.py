"""Every checker finds nothing in an empty history, in the reference and in Spark."""

from __future__ import annotations

import pytest
from keyed_support import agreed

from driftlab.checkers.reference import CHECKERS


@pytest.mark.spark
@pytest.mark.parametrize("checker", sorted(CHECKERS))
def test_an_empty_history_has_no_anomaly(spark, checker: str) -> None:
    assert agreed(spark, [], checker) == []
