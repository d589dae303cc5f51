"""The container runtime: the local services' own command lines, run in driftlab's images.

A service on the docker backend is the same ProcessService as on the local one (same
config files, ports, passwords, probes, Toxiproxy links); only its programs run in a
container of its image (docker/<service>.Dockerfile), through the Docker SDK:

- host networking, so a server bound to 127.0.0.1 listens on this machine's loopback
  and nothing else, exactly as a local process does;
- the stack folder mounted at the same path, so the data, configs and logs the
  service's code writes and reads are where it expects them, and survive a crash;
- one container per launch (`driftlab-<stack id>-<process>`): kill is SIGKILL to the
  container, pause the cgroup freezer, and a restart is a new container on the same data;
- every container labelled with its stack id (LABEL_STACK), by which `down`, the
  reaper of a dead harness and `driftlab down --backend docker` find and remove them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import secrets
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Unpack

from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.process import (
    ProcessOptions,
    ProcessRecord,
    RunOptions,
    StopOptions,
    SupervisedProcess,
    read_start_time,
    starting_note,
)

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"


def docker_host() -> str:
    """The engine address the Docker SDK uses: $DOCKER_HOST, else the default socket."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def docker_client() -> Any:
    """A Docker SDK client that has answered a ping, or ServiceError with the fix."""
    from docker.errors import DockerException

    import docker

    url = docker_host()
    try:
        client = docker.DockerClient(base_url=url, timeout=60)
        client.ping()
    except DockerException as exc:
        raise ServiceError(
            f"no Docker engine at {url}: start Docker (`bash scripts/docker-images` starts "
            f"one and builds the images) or use --backend local ({exc})"
        ) from None
    return client


LABEL_STACK = "driftlab.stack"
LABEL_ROOT = "driftlab.root"  # the stack folder, to tell a dead stack's leftovers
IMAGE_TAG = "dev"  # scripts/docker-images builds driftlab/<image>:dev
INIT = True  # docker-init as PID 1: signals reach the server, zombies are reaped

# Where each program lives in the images (the Debian packages' paths, as locally).
IMAGE_BINARIES = {
    "initdb": "/usr/lib/postgresql/15/bin/initdb",
    "postgres": "/usr/lib/postgresql/15/bin/postgres",
    "redis-server": "/usr/bin/redis-server",
    "rabbitmq-server": "/usr/lib/rabbitmq/bin/rabbitmq-server",
    "epmd": "/usr/bin/epmd",
    "nats-server": "/usr/sbin/nats-server",
    "driftlab-toxiproxy": "/usr/local/bin/driftlab-toxiproxy",
}
IMAGE_JAVA = "/usr/bin/java"
IMAGE_KAFKA = Path("/opt/driftlab/kafka")
IMAGES = ("postgres", "redis", "rabbitmq", "nats", "toxiproxy", "kafka", "connect")


def image_name(image: str) -> str:
    """The tag of one of driftlab's images."""
    return f"driftlab/{image}:{IMAGE_TAG}"


def image_for(service: str) -> str:
    """The image a stack service runs in ("kafka-2", a node of the cluster: kafka)."""
    base = service.rsplit("-", 1)[0] if service[-1:].isdigit() else service
    if base not in IMAGES:
        raise ServiceError(f"no driftlab image runs the service {service!r}")
    return base


def stack_id(root: Path) -> str:
    """A short id of the stack folder: container names and the stack label."""
    return hashlib.sha256(str(Path(root).absolute()).encode()).hexdigest()[:12]


def missing_images(client: Any, images: Sequence[str]) -> list[str]:
    """The images of `images` the engine does not have."""
    from docker.errors import ImageNotFound

    missing = []
    for image in images:
        try:
            client.images.get(image_name(image))
        except ImageNotFound:
            missing.append(image_name(image))
    return missing


def stack_containers(client: Any, sid: str | None = None) -> list[Any]:
    """Every container of the stack `sid` (of any driftlab stack with None), stopped
    ones included."""
    label = LABEL_STACK if sid is None else f"{LABEL_STACK}={sid}"
    # ignore_removed: the list is inspected container by container, and one removed
    # meanwhile (a reaper or a `down` racing this call) is simply no longer listed.
    return list(client.containers.list(all=True, filters={"label": label}, ignore_removed=True))


def remove_containers(client: Any, containers: Sequence[Any]) -> list[str]:
    """Force-remove the containers (SIGKILL first); returns their names."""
    from docker.errors import NotFound

    removed = []
    for container in containers:
        # NotFound: removed meanwhile (a reaper and a `down` may race).
        with contextlib.suppress(NotFound):
            container.remove(force=True)
        removed.append(container.name)
    return removed


def _account(user: str | None) -> tuple[int, int]:
    """(uid, gid) a container's command runs as: the named account of this machine,
    else whoever runs the harness (as a local process would be)."""
    if user is not None:
        entry = pwd.getpwnam(user)
        return entry.pw_uid, entry.pw_gid
    return os.getuid(), os.getgid()


class ContainerRuntime:
    """Runs a stack's programs in containers of `image` (see the module)."""

    def __init__(self, client: Any, sid: str, root: Path, image: str) -> None:
        self.client = client
        self.sid = sid
        self.root = Path(root).absolute()
        self.image = image

    def binary(self, key: str) -> str:
        return IMAGE_BINARIES[key]

    def java(self) -> str:
        return IMAGE_JAVA

    def kafka_libs(self) -> Path:
        return IMAGE_KAFKA / "libs"

    def kafka_plugins(self) -> Path:
        return IMAGE_KAFKA / "plugins"

    def container_name(self, process: str) -> str:
        return f"driftlab-{self.sid}-{process}"

    def create(
        self,
        process: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None,
        cwd: Path | None,
        user: str | None,
    ) -> Any:
        """Start a container running `argv`, output appended to `log_path` (a file in
        the stack folder, which the image's entry script opens before dropping to the
        account)."""
        uid, gid = _account(user)
        environment = dict(env or {})
        environment.update(DRIFTLAB_LOG=str(log_path), DRIFTLAB_UID=str(uid), DRIFTLAB_GID=str(gid))
        return self.run_container(
            process,
            image_name(self.image),
            list(argv),
            environment,
            working_dir=str(cwd or self.root),
            volumes={str(self.root): {"bind": str(self.root), "mode": "rw"}},
        )

    def run_container(
        self,
        process: str,
        image: str,
        command: list[str] | None,
        environment: dict[str, str],
        *,
        labels: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Any:
        """Start `process`'s container of `image`, detached, on the host's network and
        labelled with its stack (so the reaper finds it), `options` docker's own."""
        return self.client.containers.run(
            image,
            command=command,
            name=self.container_name(process),
            detach=True,
            init=INIT,
            network_mode="host",
            environment=environment,
            labels={LABEL_STACK: self.sid, LABEL_ROOT: str(self.root), **(labels or {})},
            **options,
        )

    def remove(self, process: str) -> None:
        """Remove the process's container of an earlier launch, if any."""
        from docker.errors import NotFound

        with contextlib.suppress(NotFound):
            self.client.containers.get(self.container_name(process)).remove(force=True)

    def process(
        self, name: str, argv: Sequence[str], log_path: Path, **options: Unpack[ProcessOptions]
    ) -> SupervisedProcess:
        # die_with_parent has no meaning for a container: the stack's reaper removes
        # them by label when their harness dies.
        options.pop("die_with_parent", None)
        return ContainerProcess(self, name, argv, log_path, **options)

    def adopt(
        self, name: str, record: ProcessRecord, **options: Unpack[StopOptions]
    ) -> SupervisedProcess:
        proc = ContainerProcess(self, name, [], Path(record.log_path), **options)
        proc.record = record
        return proc

    def run(self, argv: Sequence[str], log_path: Path, **options: Unpack[RunOptions]) -> int:
        import requests

        log_path.parent.mkdir(parents=True, exist_ok=True)
        process = f"{self.image}-once-{secrets.token_hex(3)}"
        container = self.create(
            process, argv, log_path, env=None, cwd=options.get("cwd"), user=options.get("user")
        )
        try:
            # None: the client's own read timeout (docker_client's 60 s).
            return int(container.wait(timeout=options.get("timeout"))["StatusCode"])
        except requests.exceptions.RequestException as exc:
            raise ServiceError(
                f"{Path(argv[0]).name} did not finish in time ({exc}); see {log_path}"
            ) from exc
        finally:
            container.remove(force=True)


class ContainerProcess(SupervisedProcess):
    """A SupervisedProcess whose process is a container's (see the module).

    The record holds the container's main process as this machine sees it, so the
    stack's state file reads as the local backend's; the container itself is found by
    its name.
    """

    def __init__(
        self,
        runtime: ContainerRuntime,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        **options: Unpack[ProcessOptions],
    ) -> None:
        super().__init__(name, argv, log_path, **options)
        self.runtime = runtime
        self._exit_code: int | None = None

    def _container(self) -> Any | None:
        from docker.errors import NotFound

        try:
            return self.runtime.client.containers.get(self.runtime.container_name(self.name))
        except NotFound:
            return None

    def start(self) -> ProcessRecord:
        """Start a fresh container (the last launch's, dead, is removed first)."""
        if self.is_running():
            raise ServiceError(f"{self.name}: already running as pid {self.pid}")
        self.runtime.remove(self.name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(starting_note(list(self.argv), "in a container "))
        from docker.errors import DockerException

        try:
            container = self.runtime.create(
                self.name, self.argv, self.log_path, env=self.env, cwd=self.cwd, user=self.user
            )
        except DockerException as exc:
            raise ServiceError(f"{self.name}: cannot start its container: {exc}") from exc
        self._exit_code = None
        container.reload()
        pid = int(container.attrs["State"].get("Pid") or 0)
        self.record = ProcessRecord(pid, pid, read_start_time(pid) or 0, str(self.log_path))
        return self.record

    def _status(self) -> str | None:
        container = self._container()
        if container is None:
            return None
        if container.status == "exited":
            self._exit_code = int(container.attrs["State"]["ExitCode"])
        return str(container.status)

    def is_running(self) -> bool:
        """Whether the container runs (a paused one counts, as a SIGSTOPped process)."""
        return self.record is not None and self._status() in ("running", "paused")

    def returncode(self) -> int | None:
        return self._exit_code

    def kill(self) -> None:
        """SIGKILL to the container: a crash of every process in it."""
        container = self._container()
        if container is None:
            return
        from docker.errors import APIError

        # APIError: the container exited in between (409, not running); nothing to kill.
        with contextlib.suppress(APIError):
            if container.status == "paused":
                container.unpause()  # the freezer holds SIGKILL until thawed
            if container.status in ("running", "paused"):
                container.kill(signal="SIGKILL")
        self._wait_exit(10.0)

    def pause(self) -> None:
        """Freeze the container (cgroup freezer): as SIGSTOP to all its processes."""
        container = self._container()
        if container is not None and container.status == "running":
            container.pause()

    def resume(self) -> None:
        """Thaw it."""
        container = self._container()
        if container is not None and container.status == "paused":
            container.unpause()

    def stop(self, timeout: float | None = None) -> None:
        """`stop_signal`, SIGKILL if it lingers; the container is removed."""
        container = self._container()
        if container is None:
            return
        from docker.errors import APIError

        timeout = self.stop_timeout if timeout is None else timeout
        # APIError: the container exited in between (409, not running).
        with contextlib.suppress(APIError):
            if container.status == "paused":
                container.unpause()
            if self.is_running():
                container.kill(signal=signal.Signals(self.stop_signal).name)
        if not self._wait_exit(timeout):
            self._log_note(f"did not stop within {timeout:.0f}s; sending SIGKILL")
            self.kill()
        self._status()  # keep the exit status before the container goes
        container.remove(force=True)
        wait_until(lambda: self._container() is None, 10, interval=0.05)
