"""Shared fixtures. Expensive ones are session-scoped: CI has two cores."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from driftlab.harness.lab.services.stack_home import ENV as STACK_DIR_ENV

_HOME = pytest.StashKey[tuple[str, str | None]]()
"""The session's stack home folder, and $DRIFTLAB_STACK_DIR as the session found it."""


def pytest_configure(config: pytest.Config) -> None:
    """Point the user's default stack folder (driftlab.harness.lab.services.stack_home) at an empty
    one of the session's: the tests' commands must never attach to, nor start, the
    stack of the user's own `driftlab up`. In /tmp, as every stack of the tests:
    PostgreSQL's unprivileged account must enter every parent."""
    folder = tempfile.mkdtemp(prefix="driftlab-tests-home-", dir="/tmp")
    os.chmod(folder, 0o755)
    config.stash[_HOME] = (folder, os.environ.get(STACK_DIR_ENV))
    os.environ[STACK_DIR_ENV] = os.path.join(folder, "stack")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give the user's setting back and remove the session's folder."""
    folder, before = config.stash[_HOME]
    if before is None:
        os.environ.pop(STACK_DIR_ENV, None)
    else:
        os.environ[STACK_DIR_ENV] = before
    shutil.rmtree(folder, ignore_errors=True)


LONGEST_FILES = (
    "test_pipeline_explore.py",
    "test_user_journey.py",
    "test_keyed_sieve.py",
    "test_lab_health.py",
    "test_scenarios_cdc.py",
)
"""The files of minutes each (pytest's durations), longest first. `make test`'s workers
take whole files in collection order: one of these taken last would leave its worker
running alone for minutes after the others are done."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put LONGEST_FILES first; every other file keeps its order, and each test its place
    in its file."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


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
    from driftlab.checkers.session import get_spark

    yield get_spark()
