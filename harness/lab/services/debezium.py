"""The Debezium PostgreSQL connector: its configuration (slot, publication, topics) and
the wait until its replication slot streams. Kafka Connect itself is connect.py."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import psycopg

from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.base import Endpoint, ServiceError

POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
SNAPSHOT_MODES = ("initial", "no_data", "never", "always", "initial_only", "when_needed")
_PG_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True, slots=True)
class DebeziumPostgres:
    """One Debezium PostgreSQL connector: what it captures and where it writes.

    `postgres` is the endpoint Connect uses (a Toxiproxy link or the server), with
    `extra` holding user, password and dbname. Change events go to topics named
    `<topic_prefix>.<schema>.<table>`. The replication slot and the publication are the
    connector's own (named after it unless given), so connectors never share a slot.
    """

    name: str
    postgres: Endpoint
    topic_prefix: str
    tables: tuple[str, ...]
    snapshot_mode: str = "initial"
    heartbeat_interval_ms: int = 0
    slot_name: str | None = None
    publication_name: str | None = None
    topic_partitions: int = 1
    topic_replication_factor: int = -1  # -1: the broker's default.replication.factor
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name):
            raise ServiceError(
                f"connector name {self.name!r} must use only letters, digits, '_', '.', '-'"
            )
        if self.snapshot_mode not in SNAPSHOT_MODES:
            raise ServiceError(
                f"connector {self.name}: snapshot_mode {self.snapshot_mode!r} is not one of "
                f"{', '.join(SNAPSHOT_MODES)}"
            )
        if not self.tables:
            raise ServiceError(f"connector {self.name}: give at least one schema.table")
        for table in self.tables:
            if "." not in table:
                raise ServiceError(
                    f"connector {self.name}: table {table!r} must be schema-qualified, "
                    f"e.g. public.{table}"
                )
        for what, value in (("slot", self.slot), ("publication", self.publication)):
            if not _PG_IDENTIFIER.match(value):
                raise ServiceError(
                    f"connector {self.name}: {what} name {value!r} must be lower-case "
                    "letters, digits and '_' (PostgreSQL's rule for replication slots)"
                )
        missing = {"user", "password", "dbname"} - set(self.postgres.extra)
        if missing:
            raise ServiceError(
                f"connector {self.name}: the postgres endpoint lacks {sorted(missing)} in extra"
            )

    @property
    def slot(self) -> str:
        """The replication slot's name."""
        return self.slot_name or "dbz_" + re.sub(r"[^a-z0-9_]", "_", self.name.lower())

    @property
    def publication(self) -> str:
        """The publication's name."""
        return self.publication_name or self.slot + "_pub"

    def topic(self, table: str) -> str:
        """The Kafka topic of a schema-qualified table's change events."""
        return f"{self.topic_prefix}.{table}"

    @property
    def heartbeat_topic(self) -> str:
        """Where heartbeats go when `heartbeat_interval_ms` > 0."""
        return f"__debezium-heartbeat.{self.topic_prefix}"

    def config(self) -> dict[str, str]:
        """The connector's configuration (docs/services-kafka.md gives the reasons)."""
        pg = self.postgres
        config = {
            "name": self.name,
            "connector.class": POSTGRES_CONNECTOR,
            "tasks.max": "1",
            "plugin.name": "pgoutput",
            "database.hostname": pg.host,
            "database.port": str(pg.port),
            "database.user": pg.extra["user"],
            "database.password": pg.extra["password"],
            "database.dbname": pg.extra["dbname"],
            "database.sslmode": "disable",
            "topic.prefix": self.topic_prefix,
            "table.include.list": ",".join(self.tables),
            "slot.name": self.slot,
            "publication.name": self.publication,
            "publication.autocreate.mode": "filtered",
            "snapshot.mode": self.snapshot_mode,
            "heartbeat.interval.ms": str(self.heartbeat_interval_ms),
            # Debezium writes numerics as base64 bytes by default; strings are readable
            # and compare exactly in the checkers.
            "decimal.handling.mode": "string",
            # The broker does not auto-create topics; Connect creates the change topics.
            "topic.creation.default.partitions": str(self.topic_partitions),
            "topic.creation.default.replication.factor": str(self.topic_replication_factor),
        }
        config.update(self.extra)
        return config


def wait_slot_streaming(connector: DebeziumPostgres, timeout: float = 60.0) -> int:
    """Block until the connector's replication slot is active; returns the walsender pid.

    A running task may still be setting up; only an active slot proves that changes
    committed from now on will be captured (with snapshot.mode=no_data, earlier ones
    are not).
    """
    pg = connector.postgres
    conninfo = psycopg.conninfo.make_conninfo(
        host=pg.host,
        port=pg.port,
        user=pg.extra["user"],
        password=pg.extra["password"],
        dbname=pg.extra["dbname"],
        connect_timeout=5,
    )

    def active_pid() -> int | None:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            row = conn.execute(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s AND active",
                (connector.slot,),
            ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    if (pid := wait_until(active_pid, timeout, 0.2)) is None:
        raise ServiceError(
            f"connector {connector.name}: replication slot {connector.slot} not active "
            f"after {timeout:.0f}s; see the connect log"
        )
    return pid
