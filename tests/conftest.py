"""Shared fixtures. Expensive ones are session-scoped: CI has two cores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def stack() -> Iterator[object]:
    """One owned local stack for the session; a test calls `stack.up("kafka", ...)` for
    what it needs (idempotent: running services are reused). Stopped at the end.

    It lives in /tmp rather than pytest's tmp_path: PostgreSQL runs as an unprivileged
    account that must be able to enter every parent folder.
    """
    import shutil
    import tempfile
    from pathlib import Path

    from harness.services.stack import Stack

    root = Path(tempfile.mkdtemp(prefix="driftlab-test-stack-", dir="/tmp"))
    root.chmod(0o755)
    lab = Stack(root, owned=True)
    try:
        yield lab
    finally:
        lab.down()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The process's SparkSession (local[*])."""
    from checkers.session import get_spark

    yield get_spark()
