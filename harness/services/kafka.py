"""Kafka in KRaft mode as supervised local JVMs: one combined node, or a 3-node cluster.

Every node is a combined broker+controller (process.roles=broker,controller) with a
static controller quorum (controller.quorum.voters), listening on 127.0.0.1 only. A
node's data lives in <stack>/data/<node name> and survives kill and restart; the first
start formats it with kafka.tools.StorageTool. Health is a real metadata round trip
through confluent_kafka's AdminClient that lists the node as a registered broker.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from harness.services import jvm
from harness.services.base import Endpoint, ServiceError, ServiceGroup
from harness.services.kafka_admin import admin_client
from harness.services.ports import LOOPBACK, port_accepts
from harness.services.process import ProcessRecord
from harness.services.supervised import ProcessService, ServiceSpec
from harness.services.toxiproxy import Links, link_name

FORMAT_TIMEOUT_S = 60.0
NODES_ENV = "DRIFTLAB_KAFKA_NODES"


def new_cluster_id() -> str:
    """A KRaft cluster id as Kafka's Uuid.toString writes it (22 url-safe base64 chars)."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        # Kafka reserves the all-zero and metadata-topic ids and never begins an id
        # with "-" (a command-line parser would read it as an option).
        if not text.startswith("-") and raw not in (bytes(16), bytes(15) + b"\x01"):
            return text


@dataclass(slots=True)
class KafkaSettings:
    """Cluster-wide choices; Kafka's defaults hold except where a comment says why."""

    nodes: int = 1
    heap: str = "512m"
    # The retention checker runs every 5 minutes by default: far too slow for
    # experiments with a retention.ms of a few seconds.
    retention_check_interval_ms: int = 1000
    # The cleaner's back-off (default 15 s) delays compaction of compacted topics.
    cleaner_backoff_ms: int = 1000
    # Extra listeners that Toxiproxy links attach to (see KafkaCluster.link).
    link_slots: int = 6
    extra: dict[str, str] = field(default_factory=dict)


class KafkaNode(ProcessService):
    """One combined broker+controller JVM; its spec holds ports "main" and "controller"."""

    def __init__(
        self, spec: ServiceSpec, node_id: int, cluster_id: str, voters: str, settings: KafkaSettings
    ) -> None:
        super().__init__(spec)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.voters = voters
        self.settings = settings
        self._admin: AdminClient | None = None

    @property
    def storage_dir(self) -> Path:
        return self.spec.data_dir / "log"

    @property
    def properties_path(self) -> Path:
        return self.spec.data_dir / "server.properties"

    @property
    def log4j_path(self) -> Path:
        return self.spec.data_dir / "log4j.properties"

    def server_properties(self) -> dict[str, object]:
        """server.properties of this node (docs/services-kafka.md gives the reasons)."""
        s = self.settings
        port, controller_port = self.spec.port("main"), self.spec.port("controller")
        replicas = min(3, s.nodes)
        # LINKn listeners advertise their Toxiproxy link's port, so a client that
        # bootstraps through the link keeps talking through it after the metadata answer.
        slots = range(1, s.link_slots + 1)
        listeners = [f"PLAINTEXT://{LOOPBACK}:{port}", f"CONTROLLER://{LOOPBACK}:{controller_port}"]
        listeners += [f"LINK{n}://{LOOPBACK}:{self.spec.port(f'link{n}')}" for n in slots]
        advertised = [f"PLAINTEXT://{LOOPBACK}:{port}"]
        advertised += [f"LINK{n}://{LOOPBACK}:{self.spec.port(f'proxy{n}')}" for n in slots]
        protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        protocols += [f"LINK{n}:PLAINTEXT" for n in slots]
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": self.voters,
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": self.storage_dir,
            # The harness creates every topic with the partitions and configs it chose.
            "auto.create.topics.enable": "false",
            "num.partitions": 1,
            "default.replication.factor": replicas,
            "offsets.topic.replication.factor": replicas,
            # Fewer internal partitions than the default 50: a quicker first group join.
            "offsets.topic.num.partitions": 5,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min(2, replicas),
            "transaction.state.log.num.partitions": 5,
            # Consumers join at once instead of after 3 s: runs are short.
            "group.initial.rebalance.delay.ms": 0,
            "log.retention.check.interval.ms": s.retention_check_interval_ms,
            # Retention checks start 30 s after the broker by default: a fresh stack would
            # delete nothing during a short retention experiment.
            "log.initial.task.delay.ms": 1000,
            "log.segment.delete.delay.ms": 1000,
            "log.cleaner.backoff.ms": s.cleaner_backoff_ms,
            # The dedupe buffer is 128 MiB of heap by default; 16 MiB fits -Xmx512m.
            "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
            # A node restarted after a kill -9 cannot register again while the controller
            # still counts its previous incarnation's session (9 s by default, and the
            # registration retries back off): a 1 s broker crash kept Kafka away for 15 s.
            "broker.session.timeout.ms": 3000,
            "broker.heartbeat.interval.ms": 750,
        }
        props.update(s.extra)
        return props

    def _java(self, main_class: str, args: list[str | Path], heap: str) -> list[str]:
        return jvm.java_argv(
            main_class,
            args,
            heap=heap,
            log4j=self.log4j_path,
            tmp_dir=self.spec.data_dir / "tmp",
            runtime=self.spec.runtime,
        )

    def prepare(self) -> None:
        """Write the configs; format the storage the first time (data is kept after)."""
        self.spec.runtime.kafka_libs()  # missing jars are named now
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        jvm.write_properties(self.properties_path, self.server_properties())
        jvm.write_log4j(self.log4j_path)
        self._admin = None
        if (self.storage_dir / "meta.properties").exists():
            return
        argv = self._java(
            "kafka.tools.StorageTool",
            ["format", "-t", self.cluster_id, "-c", self.properties_path, "--ignore-formatted"],
            heap="256m",
        )
        try:
            status = self.spec.runtime.run(argv, self.log_path, timeout=FORMAT_TIMEOUT_S)
        except ServiceError as exc:
            raise ServiceError(f"{self.name}: storage format: {exc}") from None
        if status != 0:
            raise ServiceError(
                f"{self.name}: formatting {self.storage_dir} failed (status "
                f"{status}); see {self.log_path}. A folder formatted for another "
                "cluster must be removed first."
            )

    def command(self) -> list[str]:
        return self._java("kafka.Kafka", [self.properties_path], self.settings.heap)

    def probe(self) -> bool:
        """A metadata round trip to this node that lists it as a registered broker."""
        if not port_accepts(self.spec.port("main")):
            return False
        if self._admin is None:
            self._admin = admin_client(self.endpoint().address)
        return self.node_id in self._admin.list_topics(timeout=2.0).brokers

    def endpoint(self) -> Endpoint:
        """The node's PLAINTEXT listener."""
        return Endpoint(LOOPBACK, self.spec.port("main"), {"node_id": str(self.node_id)})

    def bound_ports(self) -> dict[str, int]:
        """Its listeners; the `proxyN` ports it advertises are Toxiproxy's."""
        return {k: p for k, p in self.spec.ports.items() if not k.startswith("proxy")}

    def link_ports(self, slot: int) -> tuple[int, int]:
        """(listener port, advertised proxy port) of link slot `slot`."""
        return self.spec.port(f"link{slot}"), self.spec.port(f"proxy{slot}")


class KafkaCluster(ServiceGroup[KafkaNode]):
    """A KRaft cluster of `settings.nodes` combined nodes (1 by default, 3 as an option).

    It offers what the stack uses of a ProcessService (spec, on_launch, records, adopt,
    healthy) while being several processes: one per node, each a KafkaNode.

    The cluster's spec keeps every node's ports ("main"/"controller" for node 1,
    "main-N"/"controller-N" for node N) and the cluster id (in `secrets`), so a
    restarted or adopted stack finds the same addresses. Whole-cluster faults go through
    this object (a kill is a crash, though not a power loss: the page cache survives);
    one node's through `nodes[i]`.
    """

    def __init__(self, spec: ServiceSpec, settings: KafkaSettings | None = None) -> None:
        self.spec = spec
        self.settings = settings or KafkaSettings()
        if self.settings.nodes not in (1, 3):
            raise ServiceError(
                f"kafka: nodes={self.settings.nodes} is not supported; use 1 (a combined "
                "single node) or 3 (a three-voter quorum)"
            )
        cluster_id = spec.secrets.setdefault("cluster_id", new_cluster_id())
        node_specs = [self._node_spec(i) for i in range(1, self.settings.nodes + 1)]
        voters = ",".join(
            f"{i}@{LOOPBACK}:{s.port('controller')}" for i, s in enumerate(node_specs, 1)
        )
        super().__init__(
            spec.name,
            [
                KafkaNode(s, i, cluster_id, voters, self.settings)
                for i, s in enumerate(node_specs, 1)
            ],
        )

    @property
    def nodes(self) -> list[KafkaNode]:
        """The cluster's nodes, node 1 first."""
        return self.members

    def _node_spec(self, node_id: int) -> ServiceSpec:
        single = self.settings.nodes == 1
        suffix = "" if node_id == 1 else f"-{node_id}"
        return ServiceSpec(
            name=self.spec.name if single else f"{self.spec.name}-{node_id}",
            root=self.spec.root,
            ports={
                key: self.spec.port(key + suffix)
                for key in (
                    "main",
                    "controller",
                    *(
                        f"{kind}{n}"
                        for n in range(1, self.settings.link_slots + 1)
                        for kind in ("link", "proxy")
                    ),
                )
            },
            die_with_parent=self.spec.die_with_parent,
            runtime=self.spec.runtime,
        )

    @property
    def bootstrap_servers(self) -> str:
        """Every node's listener, as clients' bootstrap.servers."""
        return ",".join(n.endpoint().address for n in self.nodes)

    def link(self, links: Links, client: str) -> str:
        """Route `client` through Toxiproxy: returns its bootstrap.servers.

        Each client takes one of the `link_slots` listeners (kept in the spec, so the
        same client gets the same slot again) and one link per node, named
        "<client>->kafka" (or "<client>->kafka-N"); faults on those links then hit
        all of the client's traffic, metadata and fetches included. Idempotent.
        """
        key = f"link-slot:{client}"
        if key not in self.spec.secrets:
            taken = {v for k, v in self.spec.secrets.items() if k.startswith("link-slot:")}
            free = [str(n) for n in range(1, self.settings.link_slots + 1) if str(n) not in taken]
            if not free:
                users = sorted(
                    k.split(":", 1)[1] for k in self.spec.secrets if k.startswith("link-slot:")
                )
                raise ServiceError(
                    f"kafka: all {self.settings.link_slots} link slots are taken (by "
                    f"{', '.join(users)}); raise KafkaSettings.link_slots for {client!r}"
                )
            self.spec.secrets[key] = free[0]
        slot = int(self.spec.secrets[key])
        addresses = []
        for node in self.nodes:
            listener, proxy = node.link_ports(slot)
            made = links.create(
                link_name(client, node.name), Endpoint(LOOPBACK, listener), listen_port=proxy
            )
            addresses.append(made.address)
        return ",".join(addresses)

    def bound_ports(self) -> dict[str, int]:
        """Every stopped node's listeners (a running node's are its own already)."""
        return {
            f"{node.name} {role}": port
            for node in self.nodes
            if not node.is_running()
            for role, port in node.bound_ports().items()
        }

    def healthy(self) -> bool:
        """One probe of every node, without waiting."""
        return all(n.healthy() for n in self.nodes)

    def stop(self) -> None:
        """Stop every node (SIGTERM: a controlled shutdown; SIGKILL after the grace).

        All at once: stopped one by one, the last nodes lose their quorum and wait out
        the whole grace period.
        """
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            for done in [pool.submit(node.stop) for node in self.nodes]:
                done.result()

    def endpoint(self) -> Endpoint:
        """Node 1's listener; `extra["bootstrap_servers"]` lists every node."""
        first = self.nodes[0].endpoint()
        return Endpoint(first.host, first.port, {"bootstrap_servers": self.bootstrap_servers})

    # --- what the stack expects of a ProcessService (the cluster is several) -----------

    @property
    def on_launch(self) -> Callable[[ServiceSpec], None] | None:
        """Called after each node's launch (the stack writes its state file)."""
        return self.nodes[0].on_launch

    @on_launch.setter
    def on_launch(self, callback: Callable[[ServiceSpec], None] | None) -> None:
        for node in self.nodes:
            node.on_launch = callback

    def records(self) -> dict[str, ProcessRecord]:
        """The live node processes, by node name, for the stack's state file."""
        return {n.name: r for n in self.nodes for r in n.records().values()}

    def adopt(self, records: Mapping[str, ProcessRecord]) -> None:
        """Take over node processes started by another harness process."""
        for node in self.nodes:
            if node.name in records:
                node.adopt({"main": records[node.name]})


def cluster_from_spec(spec: ServiceSpec) -> KafkaCluster:
    """The stack's Kafka: as many nodes as its saved spec has, else $DRIFTLAB_KAFKA_NODES.

    A 3-node cluster's spec keeps the port "main-3", so attaching to a running stack
    rebuilds the cluster it started whatever the environment says now.
    """
    if spec.ports:
        nodes = 3 if "main-3" in spec.ports else 1
    else:
        wanted = os.environ.get(NODES_ENV, "1")
        if wanted not in ("1", "3"):
            raise ServiceError(f"{NODES_ENV}={wanted!r}: Kafka runs with 1 or 3 nodes")
        nodes = int(wanted)
    return KafkaCluster(spec, KafkaSettings(nodes=nodes))
