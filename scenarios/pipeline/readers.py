"""Reading a pipeline's stores from outside, as a user would look at them.

Every reader goes to the service itself (not through a link), so no fault hides what
a store holds: the source through its table or the user's `read` query, a derived
store through its Redis key pattern, its SQL query, its Kafka topic
(driftlab.scenarios.pipeline.kafka_reader) or its HTTP GET
(driftlab.scenarios.pipeline.http_reader). A
reading is `key -> (value, version)`, version None where the store keeps none; a log
store's is how many times each (key, value) arrived.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

import psycopg
import redis
from psycopg import sql

from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.setups.connect import direct_pg_connect, redis_client
from driftlab.harness.lab.setups.stores import State
from driftlab.scenarios.pipeline.http_reader import HttpReader
from driftlab.scenarios.pipeline.kafka_reader import KafkaReader
from driftlab.scenarios.pipeline.links import Reach, fill
from driftlab.scenarios.pipeline.record_fields import as_text
from driftlab.scenarios.pipeline.spec_sections import StoreSpec

REDIS_BATCH = 500


class Reader(Protocol):
    """One store, read whole."""

    def read_all(self) -> State:
        """Every key the store holds now."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


class Arrivals(Protocol):
    """A log store, read whole: what arrived in it."""

    def rows(self) -> Counter[tuple[str, str]]:
        """How many times each (key, value) is in the log now."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


def _text(raw: object) -> str:
    """A column's value as text: a json or jsonb column (which psycopg parses) as its
    JSON, not as Python's repr of it."""
    return (as_text(raw) or "null") if isinstance(raw, dict | list) else str(raw)


def _version(raw: object) -> int | None:
    try:
        return int(str(raw))
    except (TypeError, ValueError):
        return None


class SqlReader:
    """A query returning key, value[, version], on PostgreSQL. A table of the schema
    `later` (the run's) not made yet holds nothing: a sink (Debezium's JDBC sink)
    creates its table with the first record it writes. Any other error is the reader's
    own (a table that is nowhere, a column, the syntax)."""

    def __init__(self, conninfo: str, query: str, later: str | None = None) -> None:
        self.conninfo = conninfo
        self.query = query
        self.later = later
        self._conn = direct_pg_connect(conninfo)

    def _rows(self) -> list[tuple[object, ...]]:
        if self._conn.closed:
            self._conn = direct_pg_connect(self.conninfo)
        try:
            return self._conn.execute(self.query.encode()).fetchall()
        except psycopg.errors.UndefinedTable as exc:
            # 'relation "<schema>.<table>" does not exist'
            if self.later is not None and f'"{self.later}.' in str(exc.diag.message_primary):
                return []
            raise

    def read_all(self) -> State:
        """Run the query; rows with a NULL value are absent keys (tombstones)."""
        rows = self._rows()
        return {
            str(r[0]): (_text(r[1]), _version(r[2]) if len(r) > 2 else None)
            for r in rows
            if r[1] is not None
        }

    def close(self) -> None:
        self._conn.close()


class LogReader(SqlReader):
    """A log store: one row (key, value) per write that arrived, repeats included."""

    def rows(self) -> Counter[tuple[str, str]]:
        """How many times each (key, value) is in the log now."""
        found = self._rows()
        return Counter((str(r[0]), str(r[1])) for r in found if r[1] is not None)


class SourceTableReader(SqlReader):
    """driftlab's source table `<namespace>.<table>(key, value, version)`."""

    def __init__(self, conninfo: str, namespace: str, table: str) -> None:
        query = sql.SQL("SELECT key, value, version FROM {} WHERE value IS NOT NULL").format(
            sql.Identifier(namespace, table)
        )
        super().__init__(conninfo, query.as_string(None))


class RedisReader:
    """Keys matching a pattern whose one `*` is the key: a string value each, or a
    hash's `field` (and `version_field`)."""

    def __init__(self, ep: Endpoint, spec: StoreSpec, values: dict[str, object]) -> None:
        assert spec.redis is not None
        self.pattern = fill(spec.redis.pattern, values)
        self.prefix, _, self.suffix = self.pattern.partition("*")
        self.field = spec.redis.field
        self.version_field = spec.redis.version_field
        self._r: redis.Redis = redis_client(ep, timeout=5.0)

    def _key(self, full: str) -> str:
        return full[len(self.prefix) : len(full) - len(self.suffix)]

    def read_all(self) -> State:
        """SCAN the pattern, then read the values in pipelined batches."""
        names = list(self._r.scan_iter(match=self.pattern, count=REDIS_BATCH))
        out: State = {}
        for i in range(0, len(names), REDIS_BATCH):
            batch = names[i : i + REDIS_BATCH]
            pipe = self._r.pipeline(transaction=False)
            for name in batch:
                if self.field is None:
                    pipe.get(name)
                else:
                    pipe.hmget(name, [self.field, self.version_field or self.field])
            for name, got in zip(batch, pipe.execute(raise_on_error=False), strict=True):
                if isinstance(got, Exception):
                    continue  # the key changed type or went away between SCAN and read
                if self.field is None:
                    value, version = got, None
                else:
                    value = got[0]
                    version = _version(got[1]) if self.version_field else None
                if value is not None:
                    out[self._key(name)] = (value, version)
        return out

    def close(self) -> None:
        self._r.close()


def _stream_reader(
    spec: StoreSpec, reach: Reach, values: dict[str, object]
) -> KafkaReader | HttpReader | None:
    """The Kafka or HTTP reader of `spec`, or None when it is read another way."""
    if spec.kafka is not None:
        return KafkaReader(reach.kafka_config(), fill(spec.kafka.topic, values), spec.fields)
    if spec.http is not None:
        return HttpReader(fill(spec.http.url, values), spec.fields)
    return None


def store_reader(
    spec: StoreSpec,
    pg_conninfo: str,
    reach: Reach,
    values: dict[str, object],
) -> Reader:
    """The reader of mirror store `spec` (`reach` gives a service's own address,
    `values` fill its templates)."""
    if spec.redis is not None:
        return RedisReader(reach.endpoint("redis"), spec, values)
    stream = _stream_reader(spec, reach, values)
    if stream is not None:
        return stream
    assert spec.sql is not None
    return SqlReader(pg_conninfo, fill(spec.sql.query, values), str(values["namespace"]))


def log_reader(
    spec: StoreSpec,
    pg_conninfo: str,
    reach: Reach,
    values: dict[str, object],
) -> Arrivals:
    """The reader of log store `spec`: one row, record or item per arrival."""
    stream = _stream_reader(spec, reach, values)
    if stream is not None:
        return stream
    assert spec.sql is not None
    return LogReader(pg_conninfo, fill(spec.sql.query, values), str(values["namespace"]))
