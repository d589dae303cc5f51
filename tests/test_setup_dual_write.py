"""The dual-write setup on real PostgreSQL, Redis and a tantivy index."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from setup_fixtures import children, cmdline, events, make_context, running, write_then_delete

from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.lab.nemesis import Nemesis
from driftlab.harness.lab.nemesis.schedule import FaultSpec, Schedule
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.services.toxiproxy import link_name
from driftlab.harness.lab.setups.app_process import AFTER_SOURCE_WRITE
from driftlab.harness.lab.setups.base import AppCrash, SetupContext
from driftlab.harness.lab.setups.connect import APP
from driftlab.scenarios.architectures.dual_write.client import DualWriteClient
from driftlab.scenarios.architectures.dual_write.setup import APP_MODULE, DualWrite

pytestmark = pytest.mark.services


@pytest.fixture
def wired(
    stack: Stack, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[DualWrite, SetupContext]]:
    setup = DualWrite()
    try:
        with running(setup, stack, tmp_path, "dw-test", **getattr(request, "param", {})) as ctx:
            yield setup, ctx
    finally:
        stack.links.heal(link_name(APP, "redis"))


@pytest.fixture
def c0(wired: tuple[DualWrite, SetupContext]) -> DualWriteClient:
    """Client c0 of the wired setup, after its first write: k = c0-1 (version 1)."""
    setup, _ = wired
    client = setup.client("c0")
    client.write("k", "c0-1")
    return client


def test_writes_reach_every_store_with_source_versions(
    wired: tuple[DualWrite, SetupContext],
) -> None:
    setup, ctx = wired
    states = write_then_delete(setup, 10)
    assert states[SOURCE_STORE] == {"k": ("a-3", 3)}
    assert states["cache"] == {"k": ("a-3", 3)}
    assert states["search"] == {"k": ("a-3", 3)}
    oks = [e for e in events(ctx) if e["type"] == "op" and e["phase"] == "ok"]
    source = [(e["key"], e["f"], e["version"]) for e in oks if e["store"] == SOURCE_STORE]
    assert source == [
        ("k", "write", 1),
        ("k", "write", 2),
        ("k", "write", 3),
        ("j", "write", 1),
        ("j", "delete", 2),
    ]
    cache = [(e["key"], e.get("value"), e["version"]) for e in oks if e["store"] == "cache"]
    assert cache[:3] == [("k", "a-1", 1), ("k", "a-2", 2), ("k", "a-3", 3)]


def test_a_crash_between_the_writes_leaves_the_derived_stores_stale(
    wired: tuple[DualWrite, SetupContext], c0: DualWriteClient
) -> None:
    setup, ctx = wired

    def crash(point: str, process: str, key: str) -> None:
        if point == AFTER_SOURCE_WRITE:
            raise AppCrash(f"{process} at {point}")

    ctx.steps.add(crash)
    with pytest.raises(AppCrash):
        c0.write("k", "c0-2")
    ctx.steps.remove(crash)
    c0.close()
    states = setup.final_states()
    assert states[SOURCE_STORE]["k"] == ("c0-2", 2)
    assert states["cache"]["k"] == ("c0-1", 1)
    assert states["search"]["k"] == ("c0-1", 1)


@pytest.mark.parametrize(
    "wired", [{"derived": ["cache"], "on_failure": "invalidate"}], indirect=True
)
def test_invalidate_removes_the_key_once_the_cache_answers_again(
    stack: Stack, wired: tuple[DualWrite, SetupContext], c0: DualWriteClient
) -> None:
    setup, ctx = wired
    stack.links.disable(link_name(APP, "redis"))
    c0.write("k", "c0-2")
    failed = [
        e
        for e in events(ctx)
        if e["type"] == "op" and e["store"] == "cache" and e["phase"] in ("fail", "info")
    ]
    assert len(failed) == 1 and failed[0]["value"] == "c0-2"
    assert setup.final_states()["cache"]["k"] == ("c0-1", 1)  # stale while unreachable
    stack.links.heal(link_name(APP, "redis"))
    c0.close()
    assert setup.quiesce(10)
    states = setup.final_states()
    assert states[SOURCE_STORE]["k"] == ("c0-2", 2)
    assert "k" not in states["cache"]
    assert any(
        e["type"] == "op" and e.get("f") == "invalidate" and e["phase"] == "ok" for e in events(ctx)
    )


@pytest.mark.parametrize(
    "wired", [{"derived": ["search"], "search": "indexer", "refresh_ms": 300}], indirect=True
)
def test_the_indexer_view_lags_and_records_its_messages(
    wired: tuple[DualWrite, SetupContext], c0: DualWriteClient
) -> None:
    setup, ctx = wired
    c0.read("k", "search")  # right after the write: the view has not caught up
    c0.close()
    assert setup.quiesce(10)
    assert setup.final_states()["search"] == {"k": ("c0-1", 1)}
    evs = events(ctx)
    read = next(e for e in evs if e["type"] == "op" and e["f"] == "read" and e["phase"] == "ok")
    assert read.get("value") is None
    actions = [e["action"] for e in evs if e["type"] == "msg"]
    assert actions == ["produce", "deliver", "apply"]
    assert any(e["type"] == "mark" and e["kind"] == "consumer-done" for e in evs)


def test_bad_parameters_are_named(stack: Stack, tmp_path: Path) -> None:
    stack.up("postgres", "redis")
    ctx = make_context(stack, tmp_path, "dw-bad", on_failure="pray")
    with pytest.raises(ValueError, match="ignore, retry or invalidate"):
        DualWrite().prepare(ctx)
    ctx.recorder.close()  # type: ignore[attr-defined]


def test_an_app_crash_fault_sigkills_the_application_process_between_the_writes(
    wired: tuple[DualWrite, SetupContext], c0: DualWriteClient
) -> None:
    setup, ctx = wired
    (instance,) = [p for p in children() if cmdline(p).endswith(APP_MODULE)]
    nemesis = Nemesis(Schedule((FaultSpec("app-crash", "app", 0.0, 30.0, {"p": 1.0}),)), setup, ctx)
    nemesis.start()
    time.sleep(0.2)
    with pytest.raises(AppCrash):
        c0.write("k", "c0-2")
    nemesis.heal_all()
    (mark,) = [e for e in events(ctx) if e["type"] == "mark" and e["kind"] == "app-crash"]
    assert json.loads(mark["extra"])["pid"] == instance
    assert instance not in children(), "the killed instance is still a child"
    with pytest.raises(ProcessLookupError):
        os.kill(instance, 0)
    c0.close()
    states = setup.final_states()
    assert states[SOURCE_STORE]["k"] == ("c0-2", 2)
    assert states["cache"]["k"] == ("c0-1", 1)  # the cache write died with the process
    assert states["search"]["k"] == ("c0-1", 1)
    restarted = setup.client("c0r1")  # a new instance, a new process
    restarted.write("k", "c0r1-1")
    restarted.close()
    assert setup.final_states()["cache"]["k"] == ("c0r1-1", 3)
