"""Client connections of a setup: through the stack's Toxiproxy links, or direct.

The application's clients go through the link `app->service`, so the nemesis can cut,
slow or reset exactly their traffic; final reads after heal go straight to the server,
so no leftover fault can hide a store's true state.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import psycopg
import redis
from confluent_kafka import Consumer, KafkaException, TopicPartition
from redis.backoff import NoBackoff
from redis.retry import Retry

from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.stack_protocol import ServiceStack

APP = "app"
"""The client name of the application's links: `app->postgres`, `app->redis`, ..."""

PG_STATEMENT_TIMEOUT_S = 5.0
"""How long an application's statement may wait for PostgreSQL before it is abandoned."""

HARNESS_PG_TIMEOUT_S = 30.0
"""How long one exchange of the harness's own PostgreSQL connections (direct, not on a
link) may take. No fault acts on them, so only a stalled server reaches it: the run then
fails as a failure of the lab instead of hanging. Generous: DDL may wait for locks."""

AMQP_HEARTBEAT_S = 2
"""The AMQP heartbeat of the lab's RabbitMQ clients. A cut link stalls the bytes and
keeps the TCP connection open, so a blocking publish waits for its confirm until the
heartbeat checker finds the connection silent: pika checks every heartbeat + 5 s, so a
call through a cut link fails within 2 x 7 s (RabbitMQ's default proposal, 60 s, held
a client for up to 130 s)."""

NO_RETRY = Retry(NoBackoff(), 0)
"""A Redis client's retry policy: none (a failed call is the caller's to handle)."""

KAFKA_CLIENT_TIMEOUTS: dict[str, int] = {
    "socket.timeout.ms": 5000,
    "socket.connection.setup.timeout.ms": 5000,
}
"""librdkafka settings merged into every Kafka client on a link: a request through a
cut link times out after 5 s instead of librdkafka's default 60 s, and the client
reconnects. Not a deadline for every call: a synchronous offset commit is queued again
meanwhile and, measured through a cut link, returned only at the heal (60 s later), so
the lab's consumers commit through BoundedCommitter; calls that take a timeout (consume,
committed, flush, list_topics) are bounded by it."""

KAFKA_COMMIT_TIMEOUT_S = 5.0
"""How long a consumer waits for an offset commit's answer before it gives up on it."""


class CommitTimeout(Exception):
    """No answer to an offset commit within its deadline: it may still land later."""


@dataclass
class _Commit:
    """One offset commit on its way: what it commits, and what came of it."""

    offsets: list[TopicPartition]
    done: threading.Event = field(default_factory=threading.Event)
    committed: list[TopicPartition] = field(default_factory=list)
    error: KafkaException | None = None


class BoundedCommitter:
    """A consumer's synchronous offset commits, each awaited at most `timeout` seconds.

    librdkafka gives a synchronous commit no deadline: through a cut link the request
    times out, is queued again, and the call returns only at the heal (measured: 60 s,
    the length of the cut). An asynchronous commit's callback is served by the consumer's
    own poll, which hands out messages too. So each commit runs synchronously on a
    thread of its own (librdkafka is thread-safe: the consumer keeps consuming) and the
    caller waits at most `timeout`, then gets CommitTimeout. Such a commit is abandoned,
    not cancelled: it may still land at the heal, and `landed()` then says so, once.
    While it is pending, a new commit fails at once: at most one is ever in flight, so
    commits reach Kafka in the order they were made.
    """

    def __init__(self, consumer: Consumer, timeout: float = KAFKA_COMMIT_TIMEOUT_S) -> None:
        self.consumer = consumer
        self.timeout = timeout
        self._abandoned: _Commit | None = None

    def commit(self, offsets: list[TopicPartition]) -> list[TopicPartition]:
        """Commit `offsets` (next offsets to read); returns the partitions committed.

        Raises KafkaException when Kafka refused the commit and CommitTimeout when it
        did not answer within `timeout` (or an abandoned commit is still pending).
        """
        pending = self._abandoned
        if pending is not None and not pending.done.is_set():
            raise CommitTimeout(
                "an earlier offset commit is still waiting for Kafka; not sending another"
            )
        attempt = _Commit(offsets)
        threading.Thread(
            target=self._run, args=(attempt,), name="kafka-commit", daemon=True
        ).start()
        if not attempt.done.wait(self.timeout):
            self._abandoned = attempt
            raise CommitTimeout(
                f"no answer from Kafka to an offset commit within {self.timeout:g} s; "
                "it may still land"
            )
        if attempt.error is not None:
            raise attempt.error
        return attempt.committed

    def pending(self) -> bool:
        """Whether an abandoned commit may have landed (or may still land) without the
        caller having taken it in through `landed()` yet."""
        return self._abandoned is not None

    def landed(self) -> list[TopicPartition]:
        """The partitions an abandoned commit committed after all, once it has returned
        (then forgotten); [] while it is pending, and when there is none."""
        pending = self._abandoned
        if pending is None or not pending.done.is_set():
            return []
        self._abandoned = None
        return pending.committed

    def _run(self, attempt: _Commit) -> None:
        try:
            answer = self.consumer.commit(offsets=attempt.offsets, asynchronous=False)
            attempt.committed = [tp for tp in answer or [] if tp.error is None]
        except KafkaException as exc:
            attempt.error = exc
        finally:
            attempt.done.set()


class StatementTimeout(psycopg.OperationalError):
    """No answer within the client-side timeout: the statement's outcome is unknown."""


class TimedConnection(psycopg.Connection[Any]):
    """A lab process's connection whose every exchange with the server gives up after
    `timeout` seconds: statements, and the BEGIN and COMMIT of `transaction()`.

    A cut link (Toxiproxy's `timeout` toxic) stalls the bytes and keeps the TCP
    connection open, so a client waited until the heal. Nothing in libpq helps there:
    measured through a cut link, a connection with keepalives (1 s idle and interval),
    tcp_user_timeout=2000 and a server-side statement_timeout of 2 s still waited 20 s
    for the heal, because the proxy's kernel acknowledges every byte and every probe and
    the server never sees the statement. Here a timer shuts the socket down at the
    deadline: libpq's wait returns, the connection is closed, and the call raises
    StatementTimeout (an outcome `info`: the write may have been applied).
    """

    timeout: float = PG_STATEMENT_TIMEOUT_S

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        """`psycopg.Connection.wait`, through which every exchange on an open
        connection goes, abandoned after `timeout` seconds."""
        fired = threading.Event()
        timer = threading.Timer(self.timeout, self._abandon, (fired,))
        timer.daemon = True
        timer.start()
        try:
            return super().wait(*args, **kwargs)
        except psycopg.OperationalError as exc:
            if fired.is_set():
                raise StatementTimeout(
                    f"no answer from PostgreSQL within {self.timeout:g} s "
                    "(client-side timeout); the outcome is unknown"
                ) from exc
            raise
        finally:
            timer.cancel()

    def _abandon(self, fired: threading.Event) -> None:
        fired.set()
        # shutdown() acts on the socket itself, which libpq shares through the fd.
        with (
            contextlib.suppress(OSError, psycopg.Error),
            socket.socket(fileno=os.dup(self.pgconn.socket)) as sock,
        ):
            sock.shutdown(socket.SHUT_RDWR)


def app_pg_connect(conninfo: str) -> TimedConnection:
    """The PostgreSQL connection of an application client or a setup's process on a
    link: autocommit, a 3 s connect timeout and every exchange abandoned after
    PG_STATEMENT_TIMEOUT_S (see TimedConnection)."""
    return TimedConnection.connect(conninfo, autocommit=True, connect_timeout=3)


def direct_pg_connect(conninfo: str) -> TimedConnection:
    """The harness's own PostgreSQL connection to the server itself (set-up, final
    reads, clean-up): autocommit, a 5 s connect timeout, and every exchange abandoned
    after HARNESS_PG_TIMEOUT_S."""
    conn = TimedConnection.connect(conninfo, autocommit=True, connect_timeout=5)
    conn.timeout = HARNESS_PG_TIMEOUT_S
    return conn


def endpoint(stack: ServiceStack, service: str, *, direct: bool = False) -> Endpoint:
    """Where the application (or, `direct`, the harness) reaches `service`."""
    if direct:
        return stack.endpoint(service)
    return stack.link(APP, service)


def pg_conninfo(ep: Endpoint) -> str:
    """A libpq connection string for a PostgreSQL endpoint (credentials in `extra`)."""
    return psycopg.conninfo.make_conninfo(
        host=ep.host,
        port=ep.port,
        user=ep.extra.get("user"),
        password=ep.extra.get("password"),
        dbname=ep.extra.get("dbname"),
    )


def redis_client(ep: Endpoint | None, timeout: float = 1.0) -> redis.Redis:
    """A Redis client (decoded strings) whose call fails after `timeout` on a cut link."""
    if ep is None:
        raise RuntimeError("redis endpoint unknown: the setup was not prepared with a cache")
    return redis.Redis(
        host=ep.host,
        port=ep.port,
        password=ep.extra.get("password"),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        decode_responses=True,
        # redis-py retries a timed-out call 3 times with up to 10 s of backoff: a 1 s
        # timeout took 15 s on a cut link, and hid retries the setup's own policy owns.
        retry=NO_RETRY,
    )
