"""Toxiproxy: the server every client link goes through, and faults on one link.

A link is a named proxy ("app->postgres") listening on a free loopback port and
forwarding to one service. A fault cuts, slows or resets that link only, leaving the
others (the CDC connector's, the checker's final reads) untouched.

Toxiproxy's API has no authentication, and any local user can reach a loopback port:
the stack runs driftlab-toxiproxy (tools/driftlab-toxiproxy, Toxiproxy's server built
by scripts/bootstrap), which serves the API on a unix socket in a folder of mode 700,
where only the stack's user can connect. The links' own listeners stay on loopback TCP.

Toxiproxy keeps its proxies in memory only: a restarted server has none, and every
client of a link would find its port closed. So each proxy made through `Links` is also
written to `proxies.json` in the server's folder (Toxiproxy's own config format), and a
(re)started server gets them back before it counts as healthy.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftlab.harness.lab.services.base import Endpoint, ServiceError
from driftlab.harness.lab.services.ports import LOOPBACK, free_port, port_is_free
from driftlab.harness.lab.services.supervised import ProcessService
from driftlab.harness.lab.services.toxiproxy_api import ToxiproxyApi

PROGRAM = "driftlab-toxiproxy"
API_DIR = "api"  # in the service's data folder, mode 700: only the stack's user enters
API_SOCKET = "toxiproxy.sock"
UNIX_SOCKET_MAX = 107  # sun_path's bytes, less the terminating NUL


def link_name(client: str, service: str) -> str:
    """The proxy name of the link from `client` to `service`."""
    return f"{client}->{service}"


class ToxiproxyService(ProcessService):
    """driftlab-toxiproxy with its API on a private unix socket."""

    @property
    def socket_path(self) -> Path:
        """The API's unix socket."""
        return self.spec.data_dir / API_DIR / API_SOCKET

    def prepare(self) -> None:
        self.spec.runtime.binary(PROGRAM)  # a missing program is named now
        self.spec.data_dir.mkdir(parents=True, exist_ok=True)
        if len(str(self.socket_path)) > UNIX_SOCKET_MAX:
            raise ServiceError(
                f"toxiproxy: the unix socket path {self.socket_path} is too long "
                f"({len(str(self.socket_path))} > {UNIX_SOCKET_MAX}); choose a shorter "
                "stack folder"
            )
        self.socket_path.parent.mkdir(exist_ok=True)
        self.socket_path.parent.chmod(0o700)

    def command(self) -> list[str]:
        return [self.spec.runtime.binary(PROGRAM), "-socket", str(self.socket_path)]

    def endpoint(self) -> Endpoint:
        # No TCP address: the API is the socket alone (the links have their ports).
        return Endpoint(LOOPBACK, 0, {"socket": str(self.socket_path)})

    def probe(self) -> bool:
        return bool(ToxiproxyApi(self.socket_path).version())

    @property
    def proxies_path(self) -> Path:
        """Every proxy made through this server's links, kept across its restarts."""
        return self.spec.data_dir / "proxies.json"

    def after_healthy(self) -> None:
        """Give a restarted server back the proxies it had (a new one has none to get)."""
        restored = self.client().restore()
        if restored:
            with open(self.log_path, "a") as log:
                log.write(f"--- driftlab: restored proxies {', '.join(restored)}\n")

    def client(self) -> Links:
        """The links of this server."""
        return Links(self.socket_path, self.proxies_path)


@dataclass(frozen=True, slots=True)
class LinkInfo:
    """One proxy as the server reports it."""

    name: str
    listen: str
    upstream: str
    enabled: bool
    toxics: tuple[str, ...]


class Links:
    """Creates links and injects faults on them, through one Toxiproxy server.

    With `memory`, each proxy made is also kept in that file, which `restore` and
    `missing` read (the server's own memory does not survive it).
    """

    def __init__(self, socket_path: Path, memory: Path | None = None) -> None:
        self.api = ToxiproxyApi(socket_path)
        self.memory = memory

    def _proxy(self, name: str) -> dict[str, Any]:
        proxy = self.api.proxy(name)
        if proxy is None:
            known = ", ".join(sorted(self.api.proxies())) or "none"
            raise ServiceError(f"no link named {name!r} (links: {known}); create it first")
        return proxy

    def create(self, name: str, upstream: Endpoint, listen_port: int | None = None) -> Endpoint:
        """A proxy `name` forwarding to `upstream`; returns the address clients use.

        Idempotent: an existing proxy with the same upstream is kept (with its port).
        """
        existing = self.api.proxy(name)
        if existing is not None and existing["upstream"] == upstream.address:
            host, port = existing["listen"].rsplit(":", 1)
            self._remember(name, existing["listen"], upstream.address)
            return Endpoint(host, int(port), dict(upstream.extra))
        if existing is not None:
            self.api.delete(name)
        if listen_port is None or not port_is_free(listen_port, allow_time_wait=True):
            listen_port = free_port()
        port = listen_port
        self.api.create(name, f"{LOOPBACK}:{port}", upstream.address)
        self._remember(name, f"{LOOPBACK}:{port}", upstream.address)
        return Endpoint(LOOPBACK, port, dict(upstream.extra))

    # --- the proxies a restarted server must get back --------------------------------

    @contextmanager
    def _memory_locked(self) -> Iterator[Path]:
        """The memory file, locked against the other harness processes of this stack."""
        assert self.memory is not None
        self.memory.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.memory.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield self.memory
        finally:
            os.close(fd)

    def remembered(self) -> dict[str, dict[str, Any]]:
        """The proxies this server should have, by name (empty without a memory)."""
        if self.memory is None:
            return {}
        try:
            entries = json.loads(self.memory.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ServiceError(
                f"toxiproxy: {self.memory} is unreadable ({exc}); delete it and make the "
                "links again (`driftlab down`, `driftlab up`)"
            ) from exc
        return {e["name"]: e for e in entries if isinstance(e, dict) and "name" in e}

    def _remember(self, name: str, listen: str, upstream: str) -> None:
        if self.memory is None:
            return
        with self._memory_locked() as path:
            entries = self.remembered()
            entry = {"name": name, "listen": listen, "upstream": upstream, "enabled": True}
            if entries.get(name) == entry:
                return
            entries[name] = entry
            tmp = path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(sorted(entries.values(), key=lambda e: e["name"]), out, indent=1)
            tmp.replace(path)

    def missing(self) -> list[str]:
        """The remembered proxies the server does not have (it lost them: a restart)."""
        remembered = self.remembered()
        if not remembered:
            return []
        return sorted(set(remembered) - set(self.api.proxies()))

    def restore(self) -> list[str]:
        """Create every remembered proxy the server lacks, on its old port; returns
        their names. A port taken since is named (clients and Kafka's advertised
        listeners know the old one)."""
        lost = self.missing()
        remembered = self.remembered()
        for name in lost:
            entry = remembered[name]
            try:
                self.api.create(name, entry["listen"], entry["upstream"])
            except ServiceError as exc:
                raise ServiceError(
                    f"toxiproxy: cannot restore link {name} on {entry['listen']} ({exc}); "
                    "stop the program on that port, or `driftlab down` and `driftlab up`"
                ) from exc
        return lost

    def list(self) -> list[LinkInfo]:
        """Every link with its state and active toxics."""
        return [
            LinkInfo(
                name,
                proxy["listen"],
                proxy["upstream"],
                bool(proxy["enabled"]),
                tuple(sorted(t["name"] for t in proxy.get("toxics") or ())),
            )
            for name, proxy in sorted(self.api.proxies().items())
        ]

    def _add_toxic(self, name: str, toxic_type: str, stream: str, **attributes: float) -> None:
        streams = ("upstream", "downstream") if stream == "both" else (stream,)
        proxy = self._proxy(name)
        present = {t["name"] for t in proxy.get("toxics") or ()}
        for direction in streams:
            toxic_name = f"{toxic_type}_{direction}"
            if toxic_name in present:
                self.api.delete_toxic(name, toxic_name)
            self.api.add_toxic(
                name,
                {
                    "type": toxic_type,
                    "name": toxic_name,
                    "stream": direction,
                    "toxicity": 1.0,
                    "attributes": {k: int(v) for k, v in attributes.items()},
                },
            )

    def cut(self, name: str) -> None:
        """A partition: bytes stop flowing both ways, connections stay open and hang.

        Clients see timeouts, not refusals, as with a dropped network. Data sent during
        the cut is discarded, so a connection that lived through it may be unusable.
        """
        self._add_toxic(name, "timeout", "both", timeout=0)

    def disable(self, name: str) -> None:
        """Take the link down: open connections close, new ones are refused."""
        self._proxy(name)
        self.api.set_enabled(name, False)

    def latency(self, name: str, ms: int, jitter_ms: int = 0, stream: str = "both") -> None:
        """Delay every chunk of data by `ms` ± `jitter_ms` in the given direction(s)."""
        self._add_toxic(name, "latency", stream, latency=ms, jitter=jitter_ms)

    def bandwidth(self, name: str, kb_per_s: int, stream: str = "downstream") -> None:
        """Limit throughput to `kb_per_s` KB/s."""
        self._add_toxic(name, "bandwidth", stream, rate=kb_per_s)

    def reset_peer(self, name: str, after_ms: int = 0) -> None:
        """Reset connections with a TCP RST (immediately, or after `after_ms`)."""
        self._add_toxic(name, "reset_peer", "upstream", timeout=after_ms)

    def slicer(
        self, name: str, average_size: int = 64, size_variation: int = 32, delay_us: int = 100
    ) -> None:
        """Split data into small packets with delays between them."""
        self._add_toxic(
            name,
            "slicer",
            "downstream",
            average_size=average_size,
            size_variation=size_variation,
            delay=delay_us,
        )

    def heal(self, name: str) -> None:
        """Remove every toxic from the link and enable it."""
        proxy = self._proxy(name)
        for toxic in proxy.get("toxics") or ():
            self.api.delete_toxic(name, toxic["name"])
        if not proxy["enabled"]:
            self.api.set_enabled(name, True)

    def heal_all(self) -> None:
        """Remove every toxic from every link and enable them all."""
        self.api.reset()
