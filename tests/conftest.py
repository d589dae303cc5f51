"""Shared fixtures. Expensive ones are session-scoped: CI has two cores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def stack(driftlab_stack: object) -> object:
    """The session's one owned local stack: the pytest plugin's `driftlab_stack`, so
    the lab's tests and scenario tests share it. A test calls `stack.up("kafka", ...)`
    for what it needs (idempotent: running services are reused). Stopped at the end,
    from a folder in /tmp (PostgreSQL's unprivileged account must enter every parent).
    """
    return driftlab_stack


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The process's SparkSession (local[*])."""
    from checkers.session import get_spark

    yield get_spark()
