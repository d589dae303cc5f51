"""An application's PostgreSQL statement through a cut link gives up at its client-side
timeout with an unknown outcome, instead of hanging until the link heals."""

from __future__ import annotations

import threading

import pytest

from harness.services.stack import Stack
from harness.setups.connect import StatementTimeout, TimedConnection, app_pg_connect, pg_conninfo
from harness.setups.dual_write import _classify_pg

pytestmark = pytest.mark.services


def test_a_statement_through_a_cut_link_times_out_before_the_heal(stack: Stack) -> None:
    stack.up("postgres")
    link = "timeout-test->postgres"
    conn = app_pg_connect(pg_conninfo(stack.link("timeout-test", "postgres")))
    conn.timeout = 1.0
    assert isinstance(conn, TimedConnection)
    assert conn.execute("SELECT 1").fetchone() == (1,)
    stack.links.cut(link)
    healed = threading.Event()

    def heal() -> None:  # a guard: without the timeout the statement waits for this
        healed.set()
        stack.links.heal(link)

    guard = threading.Timer(60, heal)
    guard.start()
    try:
        with pytest.raises(StatementTimeout) as caught:
            conn.execute("SELECT pg_sleep(0)")
        assert not healed.is_set(), "the statement waited for the heal"
    finally:
        guard.cancel()
        stack.links.heal(link)
    assert _classify_pg(caught.value).phase == "info"  # it may have been applied
    assert conn.closed
    with app_pg_connect(pg_conninfo(stack.link("timeout-test", "postgres"))) as again:
        assert again.execute("SELECT 1").fetchone() == (1,)
