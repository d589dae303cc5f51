"""Kafka in KRaft mode as supervised local JVMs: one combined node, or a 3-node cluster.

Every node is a combined broker+controller (process.roles=broker,controller) with a
static controller quorum (controller.quorum.voters), listening on 127.0.0.1 only. A
node's data lives in <stack>/data/<node name> and survives kill and restart; the first
start formats it with kafka.tools.StorageTool. Health is a real metadata round trip
through confluent_kafka's AdminClient that lists the node as a registered broker.

Every listener asks for a password (harness/lab/services/kafka_sasl.py): a client of the
lab gets its config from `kafka_client_config(stack)` (or `KafkaCluster.client_config`),
never by writing bootstrap.servers itself.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from driftlab.harness.lab.services import jvm
from driftlab.harness.lab.services.base import Endpoint, ServiceError, ServiceGroup
from driftlab.harness.lab.services.kafka_admin import admin_client
from driftlab.harness.lab.services.kafka_sasl import (
    KafkaLogin,
    server_properties,
    write_argfile,
    write_private_properties,
)
from driftlab.harness.lab.services.ports import LOOPBACK, port_accepts
from driftlab.harness.lab.services.process import ProcessRecord
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.harness.lab.services.supervised import ProcessService, ServiceSpec
from driftlab.harness.lab.services.toxiproxy import Links, link_name

FORMAT_TIMEOUT_S = 60.0
NODES_ENV = "DRIFTLAB_KAFKA_NODES"
# Written next to a node's storage formatted with the lab's SCRAM user.
SCRAM_MARKER = "scram-user"


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
    link_slots: int = 10  # a pipeline may give several processes a link of their own
    extra: dict[str, str] = field(default_factory=dict)


class KafkaNode(ProcessService):
    """One combined broker+controller JVM; its spec holds ports "main" and "controller".

    `login` is the lab's SCRAM user, `controller_password` the controllers' PLAIN one.
    """

    def __init__(
        self,
        spec: ServiceSpec,
        node_id: int,
        cluster_id: str,
        voters: str,
        settings: KafkaSettings,
        login: KafkaLogin,
        controller_password: str,
    ) -> None:
        super().__init__(spec)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.voters = voters
        self.settings = settings
        self.login = login
        self.controller_password = controller_password
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
        listeners = [f"CLIENT://{LOOPBACK}:{port}", f"CONTROLLER://{LOOPBACK}:{controller_port}"]
        listeners += [f"LINK{n}://{LOOPBACK}:{self.spec.port(f'link{n}')}" for n in slots]
        advertised = [f"CLIENT://{LOOPBACK}:{port}"]
        advertised += [f"LINK{n}://{LOOPBACK}:{self.spec.port(f'proxy{n}')}" for n in slots]
        names = ["CLIENT", "CONTROLLER", *(f"LINK{n}" for n in slots)]
        protocols = [f"{name}:{self.login.security_protocol}" for name in names]
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": self.voters,
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "CLIENT",
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
            **server_properties(
                self.login, self.controller_password, [n for n in names if n != "CONTROLLER"]
            ),
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
        # The topics' segments are on disk here: only the stack's user may read them.
        self.spec.data_dir.mkdir(parents=True, exist_ok=True)
        self.spec.data_dir.chmod(0o700)
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        write_private_properties(self.properties_path, self.server_properties())
        jvm.write_log4j(self.log4j_path)
        self._admin = None
        marker = self.spec.data_dir / SCRAM_MARKER
        if (self.storage_dir / "meta.properties").exists():
            if not marker.exists():
                raise ServiceError(
                    f"{self.name}: {self.storage_dir} was formatted without the lab's "
                    "Kafka user (by an older driftlab); stop the stack with `driftlab "
                    f"down` and remove {self.spec.data_dir}"
                )
            return
        # The SCRAM user's password goes through the java launcher's @argfile (the main
        # class and its arguments): a command line is readable by every local user.
        args = write_argfile(
            self.spec.data_dir / "format.args",
            ["kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c",
             self.properties_path, "--ignore-formatted", "--add-scram",
             self.login.scram_credential()],
        )  # fmt: skip
        argv = self._java(f"@{args}", [], heap="256m")
        # Before the format: a format cut short by a kill leaves a folder that is this
        # driftlab's, not an older one's.
        marker.touch()
        try:
            status = self.spec.runtime.run(argv, self.log_path, timeout=FORMAT_TIMEOUT_S)
        except ServiceError as exc:
            raise ServiceError(f"{self.name}: storage format: {exc}") from None
        finally:
            args.unlink(missing_ok=True)
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
            self._admin = admin_client(self.login.client_config(self.endpoint().address))
        return self.node_id in self._admin.list_topics(timeout=2.0).brokers

    def endpoint(self) -> Endpoint:
        """The node's CLIENT listener (SASL: see `KafkaCluster.client_config`)."""
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
        self.login = KafkaLogin(spec.secret("scram"))
        controller_password = spec.secret("controller")
        node_specs = [self._node_spec(i) for i in range(1, self.settings.nodes + 1)]
        voters = ",".join(
            f"{i}@{LOOPBACK}:{s.port('controller')}" for i, s in enumerate(node_specs, 1)
        )
        super().__init__(
            spec.name,
            [
                KafkaNode(s, i, cluster_id, voters, self.settings, self.login, controller_password)
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
        """Every node's listener, as clients' bootstrap.servers (a client also needs
        the login: use `client_config`)."""
        return ",".join(n.endpoint().address for n in self.nodes)

    def client_config(self, bootstrap: str | None = None, **extra: Any) -> dict[str, Any]:
        """A confluent-kafka client config, logged in as the lab's user, for `bootstrap`
        (a link's address from `link`; None: the nodes themselves), plus `extra`."""
        return self.login.client_config(bootstrap or self.bootstrap_servers, **extra)

    @property
    def client_properties_path(self) -> Path:
        """The Java clients' login settings (mode 600): security.protocol,
        sasl.mechanism, sasl.jaas.config. Written by `client_properties`."""
        return self.spec.data_dir / "client.properties"

    def client_properties(self) -> Path:
        """Write `client_properties_path` (idempotent) and return it: what a JVM client
        (Connect's worker, a pipeline's process) reads its login from."""
        self.spec.data_dir.mkdir(parents=True, exist_ok=True)
        self.spec.data_dir.chmod(0o700)
        return write_private_properties(self.client_properties_path, self.login.java_properties())

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


def kafka_client_config(
    stack: ServiceStack, client: str | None = None, settings: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The lab's confluent-kafka client config for the stack's Kafka: bootstrap.servers
    and the SASL login, plus `settings` (group.id, acks, timeouts, ...).

    `client` names the Toxiproxy link "<client>->kafka" the client goes through (made
    on first use); None reaches the nodes directly (set-up and final reads, never
    faults). Every Kafka client of the lab takes its config from here.
    """
    kafka = stack["kafka"]
    if not isinstance(kafka, KafkaCluster):
        raise ServiceError("the stack's kafka service is not a Kafka cluster")
    bootstrap = None if client is None else kafka.link(stack.links, client)
    return kafka.client_config(bootstrap, **(settings or {}))


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
