"""The outbox setup on the real stack: one transaction for the row and its event, a crash
in between rolls both back, Debezium carries the outbox to the cache."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from setup_fixtures import events, make_context

from harness.history.schema import SOURCE_STORE
from harness.services.stack import Stack
from harness.setups.base import AppCrash
from harness.setups.dual_write import AFTER_SOURCE_WRITE
from harness.setups.outbox import Outbox

pytestmark = pytest.mark.services


def test_a_crash_between_the_writes_leaves_neither(stack: Stack, tmp_path: Path) -> None:
    stack.up("postgres", "redis", "kafka", "connect")
    ctx = make_context(stack, tmp_path, "outbox-test")
    setup = Outbox()
    setup.prepare(ctx)
    setup.start()
    try:
        client = setup.client("c0")
        client.write("k", "c0-1")

        def crash_on_second(point: str, process: str, key: str) -> None:
            if point == AFTER_SOURCE_WRITE and key == "j":
                raise AppCrash("planted")

        ctx.steps.add(crash_on_second)
        with pytest.raises(AppCrash):
            client.write("j", "c0-2")
        ctx.steps.remove(crash_on_second)
        client = setup.client("c0r1")
        client.write("k", "c0r1-1")
        client.close()
        assert setup.quiesce(60)
        states = setup.final_states()
    finally:
        setup.teardown()
        ctx.recorder.close()  # type: ignore[attr-defined]

    assert states[SOURCE_STORE] == {"k": ("c0r1-1", 2)}
    assert states["cache"] == {"k": ("c0r1-1", 2)}
    ns = ctx.namespace
    with psycopg.connect(stack["postgres"].conninfo(), autocommit=True) as conn:
        outbox = conn.execute(
            sql.SQL("SELECT id, key, value, version FROM {} ORDER BY id").format(
                sql.Identifier(ns, "outbox")
            )
        ).fetchall()
    # The crashed transaction left no outbox row: two events, ids in commit order.
    assert [(k, v, ver) for _, k, v, ver in outbox] == [("k", "c0-1", 1), ("k", "c0r1-1", 2)]
    evs = events(ctx)
    crashed = [e for e in evs if e["type"] == "op" and e.get("key") == "j"]
    assert [e["phase"] for e in crashed] == ["invoke", "info"]
    produced = [e["msg_id"] for e in evs if e.get("action") == "produce"]
    assert produced == [f"event-{i}" for i, *_ in outbox]
    applied = [e["msg_id"] for e in evs if e.get("action") == "apply"]
    assert applied == produced
