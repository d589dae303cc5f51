"""Shared fixtures. Expensive ones are session-scoped: CI has two cores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The process's SparkSession (local[*])."""
    from checkers.session import get_spark

    yield get_spark()
