"""Topic administration for the harness: it creates every topic itself, with the
partitions and configs an experiment needs (auto topic creation is off).

Retention experiments need segments that roll quickly: Kafka only deletes whole closed
segments, so `segment_ms`/`segment_bytes` must be small next to `retention_ms`/
`retention_bytes`, and the broker checks retention every
`log.retention.check.interval.ms` (1 s in driftlab's broker config).

Each function takes the lab's client config for the stack's Kafka (bootstrap.servers
and the login: driftlab.harness.lab.services.kafka.kafka_client_config), not a bare address.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.base import ServiceError

_LOG = logging.getLogger("driftlab.kafka.admin")


KafkaConfig = Mapping[str, Any]
"""A confluent-kafka client config: bootstrap.servers, the login, and settings."""


def admin_client(kafka: KafkaConfig, **config: object) -> AdminClient:
    """An AdminClient on `kafka` (a client config) whose librdkafka logs go to Python
    logging, not the terminal."""
    if isinstance(kafka, str):
        # Kafka asks for a login: an address alone would only time out.
        raise TypeError(f"pass the lab's client config (kafka_client_config), not {kafka!r}")
    return AdminClient({"socket.timeout.ms": 5000, **kafka, **config}, logger=_LOG)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """One topic and the configs an experiment chose (None means the broker default)."""

    name: str
    partitions: int = 1
    replication_factor: int = 1
    retention_ms: int | None = None
    retention_bytes: int | None = None
    segment_ms: int | None = None
    segment_bytes: int | None = None
    compact: bool = False
    min_insync_replicas: int | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def configs(self) -> dict[str, str]:
        """The topic-level configs, by their Kafka names."""
        chosen = {
            "retention.ms": self.retention_ms,
            "retention.bytes": self.retention_bytes,
            "segment.ms": self.segment_ms,
            "segment.bytes": self.segment_bytes,
            "min.insync.replicas": self.min_insync_replicas,
        }
        configs = {k: str(v) for k, v in chosen.items() if v is not None}
        if self.compact:
            configs["cleanup.policy"] = "compact"
        configs.update(self.extra)
        return configs


# librdkafka (2.10 and later) drops a broker's handle when fresh metadata replaces the
# brokers it bootstrapped from; a request in flight on that handle fails with one of these,
# whether or not the broker acted on it. Asking again is safe: a topic that exists with the
# same partitions is accepted.
_HANDOVER = frozenset({KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT})
_CREATE_ATTEMPTS = 3


def create_topics(kafka: KafkaConfig, specs: Iterable[TopicSpec], *, timeout: float = 30.0) -> None:
    """Create the topics and wait until every partition has a leader.

    A topic that already exists with the same partition count is accepted (a restarted
    stack keeps its topics); any other failure names the topic and Kafka's reason.
    """
    specs = list(specs)
    admin = admin_client(kafka)
    pending = specs
    for attempt in range(1, _CREATE_ATTEMPTS + 1):
        pending = _create(admin, pending, timeout, last=attempt == _CREATE_ATTEMPTS)
        if not pending:
            break
        _LOG.info(
            "kafka: asking again for %s: a broker handle went away", [s.name for s in pending]
        )
    _wait_leaders(admin, [s.name for s in specs], timeout)


def _create(
    admin: AdminClient, specs: list[TopicSpec], timeout: float, *, last: bool
) -> list[TopicSpec]:
    """Ask for the topics once; the ones to ask for again (a handover, unless `last`)."""
    new = [NewTopic(s.name, s.partitions, s.replication_factor, config=s.configs()) for s in specs]
    futures = admin.create_topics(new, operation_timeout=timeout, request_timeout=timeout)
    again = []
    for spec in specs:
        try:
            futures[spec.name].result(timeout)
        except KafkaException as exc:
            err = exc.args[0]
            if err.name() == "TOPIC_ALREADY_EXISTS" and _partitions(admin, spec.name) == (
                spec.partitions
            ):
                continue
            if err.code() in _HANDOVER and not last:
                again.append(spec)
                continue
            raise ServiceError(
                f"kafka: cannot create topic {spec.name!r} ({spec.partitions} partitions, "
                f"replication {spec.replication_factor}, configs {spec.configs()}): "
                f"{err.str()}"
            ) from exc
    return again


def delete_topics(kafka: KafkaConfig, names: Iterable[str], *, timeout: float = 30.0) -> None:
    """Delete topics; one that does not exist is not an error."""
    names = list(names)
    if not names:
        return
    admin = admin_client(kafka)  # must outlive the futures
    futures = admin.delete_topics(names, operation_timeout=timeout)
    for name, future in futures.items():
        try:
            future.result(timeout)
        except KafkaException as exc:
            if exc.args[0].name() != "UNKNOWN_TOPIC_OR_PART":
                raise ServiceError(f"kafka: cannot delete topic {name!r}: {exc}") from exc


def topic_configs(kafka: KafkaConfig, name: str, *, timeout: float = 10.0) -> dict[str, str]:
    """The effective configs of a topic (its own and the inherited ones)."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    admin = admin_client(kafka)  # must outlive the future
    future = admin.describe_configs([resource])[resource]
    try:
        entries = future.result(timeout)
    except KafkaException as exc:
        raise ServiceError(f"kafka: cannot describe topic {name!r}: {exc}") from exc
    return {key: entry.value for key, entry in entries.items()}


def set_topic_configs(
    kafka: KafkaConfig, name: str, configs: dict[str, str], *, timeout: float = 10.0
) -> None:
    """Set some of a topic's configs, leaving the others as they are."""
    entries = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        for key, value in configs.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=entries)
    admin = admin_client(kafka)  # must outlive the future
    future = admin.incremental_alter_configs([resource])[resource]
    try:
        future.result(timeout)
    except KafkaException as exc:
        raise ServiceError(f"kafka: cannot set {configs} on topic {name!r}: {exc}") from exc


def list_topic_names(kafka: KafkaConfig, *, timeout: float = 10.0) -> set[str]:
    """Every topic's name, internal ones included."""
    return set(admin_client(kafka).list_topics(timeout=timeout).topics)


def _partitions(admin: AdminClient, name: str) -> int:
    topic = admin.list_topics(topic=name, timeout=10.0).topics.get(name)
    return len(topic.partitions) if topic is not None else 0


def _wait_leaders(admin: AdminClient, names: list[str], timeout: float) -> None:
    # create_topics returns once the controller has recorded the topic; a produce
    # right after can still meet a partition without a leader on the broker.
    missing = list(names)

    def led() -> bool:
        meta = admin.list_topics(timeout=timeout)
        missing[:] = [
            n
            for n in names
            if n not in meta.topics
            or meta.topics[n].error is not None
            or any(p.leader < 0 for p in meta.topics[n].partitions.values())
        ]
        return not missing

    if not wait_until(led, timeout):
        raise ServiceError(f"kafka: topics {missing} have no leader after {timeout:.0f}s")
