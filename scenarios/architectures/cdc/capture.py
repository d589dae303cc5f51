"""The run's Debezium capture of one source table: its connector, topic, replication
slot and publication, made together and dropped together.

Every setup that reads PostgreSQL's changes through Kafka (cdc, outbox, snapshot-stream,
compacted-log) holds one; they differ only in the snapshot mode, the topic's settings
and what "ready" means (streaming, or the slot's consistent point).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from psycopg import sql

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.debezium import DebeziumPostgres
from driftlab.harness.lab.services.kafka import kafka_client_config
from driftlab.harness.lab.services.kafka_admin import TopicSpec, create_topics
from driftlab.harness.lab.services.postgres import drop_replication_slots
from driftlab.harness.lab.setups.base import SetupContext
from driftlab.harness.lab.setups.connect import direct_pg_connect

log = logging.getLogger("driftlab.setups.cdc")

TOPIC_PREFIX = "dbz"


class Capture:
    """The connector capturing `<namespace>.<table_name>` into its own topic."""

    def __init__(
        self,
        ctx: SetupContext,
        table_name: str,
        pg_direct: str,
        *,
        snapshot_mode: str,
        partitions: int = 1,
        connector_extra: dict[str, str] | None = None,
    ) -> None:
        ns = ctx.namespace
        self.stack = ctx.stack
        self.pg_direct = pg_direct
        self.connector: DebeziumPostgres | None = DebeziumPostgres(
            name=ns,
            postgres=ctx.stack.link("connect", "postgres"),
            # Debezium names its metrics MBeans after the prefix: a prefix of the run's
            # own keeps a connector another run left behind from blocking this one.
            topic_prefix=f"{TOPIC_PREFIX}_{ns}",
            tables=(f"{ns}.{table_name}",),
            snapshot_mode=snapshot_mode,
            topic_partitions=partitions,
            extra=dict(connector_extra or {}),
        )
        self.topic = self.connector.topic(f"{ns}.{table_name}")
        self.slot = self.connector.slot

    def open(self, topic: TopicSpec, ready: Callable[[DebeziumPostgres], None]) -> None:
        """Create the topic, register the connector and wait until `ready` returns; a
        failure on the way drops whatever was made."""
        assert self.connector is not None
        try:
            create_topics(kafka_client_config(self.stack), [topic])
            self.stack["connect"].put_connector(self.connector)
            ready(self.connector)
        except BaseException:
            self.drop()
            raise

    def drop(self) -> None:
        """Remove the connector, its replication slot and its publication (once)."""
        if self.connector is None:
            return
        connector, self.connector = self.connector, None
        with contextlib.suppress(ServiceError):
            self.stack["connect"].delete_connector(connector.name)
        with direct_pg_connect(self.pg_direct) as conn:
            if not drop_replication_slots(conn, connector.slot):
                log.warning("slot %s still in use: drop it by hand", connector.slot)
            conn.execute(
                sql.SQL("DROP PUBLICATION IF EXISTS {}").format(
                    sql.Identifier(connector.publication)
                )
            )
