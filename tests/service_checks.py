"""Checks of a service's behaviour that hold on every backend (local processes and
containers alike), shared by the tests of each."""

from __future__ import annotations

import psycopg
import pytest

from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.supervised import ProcessService


def pg_connect(endpoint: Endpoint, timeout: int = 3) -> psycopg.Connection:
    """An autocommit connection to PostgreSQL at `endpoint` (its credentials in extra)."""
    return psycopg.connect(
        host=endpoint.host,
        port=endpoint.port,
        user=endpoint.extra["user"],
        password=endpoint.extra["password"],
        dbname=endpoint.extra["dbname"],
        connect_timeout=timeout,
        autocommit=True,
    )


def check_committed_rows_survive_a_kill(postgres: ProcessService, link: Endpoint) -> None:
    """A row committed before a SIGKILL is there after the restart, through the same
    link (its port survives); while the server is down the link refuses."""
    with pg_connect(link) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t_crash (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t_crash VALUES (1, 'committed') ON CONFLICT DO NOTHING")
    postgres.kill()
    assert not postgres.is_running()
    with pytest.raises(psycopg.OperationalError):
        pg_connect(link, timeout=2).close()
    postgres.start()
    postgres.wait_healthy(60)
    with pg_connect(link) as conn:
        assert conn.execute("SELECT v FROM t_crash WHERE id = 1").fetchone() == ("committed",)
