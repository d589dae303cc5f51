"""The outbox setup on the real stack: one transaction for the row and its event, a crash
in between (a SIGKILL of the application process) rolls both back, Debezium carries the
outbox to the cache."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from setup_fixtures import children, cmdline, events, running

from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.lab.nemesis import Nemesis
from driftlab.harness.lab.nemesis.schedule import FaultSpec, Schedule
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.setups.app_process import AFTER_SOURCE_WRITE
from driftlab.harness.lab.setups.base import AppCrash
from driftlab.scenarios.architectures.outbox.setup import OUTBOX_APP_MODULE, Outbox

pytestmark = pytest.mark.services


def test_a_crash_between_the_writes_leaves_neither(stack: Stack, tmp_path: Path) -> None:
    setup = Outbox()
    with running(setup, stack, tmp_path, "outbox-test") as ctx:
        client = setup.client("c0")
        client.write("k", "c0-1")
        (instance,) = _instances()

        def crash_on_second(point: str, process: str, key: str) -> None:
            if point == AFTER_SOURCE_WRITE and key == "j":
                raise AppCrash("planted")

        ctx.steps.add(crash_on_second)
        with pytest.raises(AppCrash):
            client.write("j", "c0-2")
        ctx.steps.remove(crash_on_second)
        # A hook's AppCrash is made real: the instance died with its transaction open.
        with pytest.raises(ProcessLookupError):
            os.kill(instance, 0)
        client = setup.client("c0r1")
        client.write("k", "c0r1-1")
        client.close()
        assert setup.quiesce(60)
        states = setup.final_states()

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


def test_an_app_crash_fault_sigkills_the_instance_with_its_transaction_open(
    stack: Stack, tmp_path: Path
) -> None:
    setup = Outbox()
    with running(setup, stack, tmp_path, "outbox-kill") as ctx:
        client = setup.client("c0")
        client.write("k", "c0-1")
        (instance,) = _instances()
        schedule = Schedule((FaultSpec("app-crash", "app", 0.0, 30.0, {"p": 1.0}),))
        nemesis = Nemesis(schedule, setup, ctx)
        nemesis.start()
        time.sleep(0.2)
        with pytest.raises(AppCrash):
            client.write("k", "c0-2")
        nemesis.heal_all()
        client.close()
        assert instance not in children(), "the killed instance is still a child"
        # The key's row lock died with the connection: a new instance writes it at once.
        restarted = setup.client("c0r1")
        restarted.write("k", "c0r1-1")
        restarted.close()
        assert setup.quiesce(60)
        states = setup.final_states()

    evs = events(ctx)
    (mark,) = [e for e in evs if e["type"] == "mark" and e["kind"] == "app-crash"]
    assert json.loads(str(mark["extra"]))["pid"] == instance
    # Rolled back whole: version 2 is the restarted instance's write, not the killed one's.
    assert states[SOURCE_STORE] == {"k": ("c0r1-1", 2)}
    assert states["cache"] == {"k": ("c0r1-1", 2)}
    killed = [e for e in evs if e["type"] == "op" and e.get("value") == "c0-2"]
    assert [e["phase"] for e in killed] == ["invoke", "info"]


def _instances() -> list[int]:
    """The outbox application instances running as this process's children."""
    return [p for p in children() if cmdline(p).endswith(OUTBOX_APP_MODULE)]
