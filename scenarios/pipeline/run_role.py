"""The PostgreSQL role a pipeline run's parties log in as on driftlab's own PostgreSQL.

The stack's own login is its superuser, which may run `COPY ... TO PROGRAM` (a shell
command as the account that runs the server) and create roles. A user's processes, its
connectors and the workload need none of that: they get a role of the run's own, named
after its namespace, with a fresh password, that may log in, use logical replication
(`REPLICATION`: slots, Debezium's walsender), create publications in the database and
own the run's schema (its tables, the sink's tables). It is dropped at the end of the
run, what it owned given to the stack's superuser (the schema stays for inspection);
the run's lease tells a dead run's leftover role from a live one's
(driftlab.harness.lab.runner.clean_stack).
"""

from __future__ import annotations

import secrets
from typing import Any

import psycopg
from psycopg import sql

from driftlab.harness.lab.services.postgres import drop_role


def create(conn: psycopg.Connection[Any], namespace: str, dbname: str) -> dict[str, str]:
    """Create the run's role `namespace` and its schema `namespace` (owned by it) on the
    superuser's connection `conn`; the role's login (`user`, `password`)."""
    password = secrets.token_urlsafe(24)
    role = sql.Identifier(namespace)
    conn.execute(
        sql.SQL(
            "CREATE ROLE {} LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE "
            "NOBYPASSRLS PASSWORD {}"
        ).format(role, sql.Literal(password))
    )
    # CREATE on the database: Debezium creates its publication (FOR TABLE, of tables
    # the role owns); CONNECT is PUBLIC's already, said here for a database that revoked it.
    conn.execute(
        sql.SQL("GRANT CONNECT, CREATE ON DATABASE {} TO {}").format(sql.Identifier(dbname), role)
    )
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {} AUTHORIZATION {}").format(role, role))
    return {"user": namespace, "password": password}


def drop(conn: psycopg.Connection[Any], namespace: str) -> None:
    """Drop the run's role `namespace` (a no-op when there is none) on the superuser's
    connection `conn` (driftlab.harness.lab.services.postgres.drop_role)."""
    drop_role(conn, namespace)
