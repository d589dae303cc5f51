"""Free loopback ports for services and Toxiproxy links.

Ports come from below the kernel's ephemeral range on purpose: a service keeps its port
across kill and restart, and while it is down an outgoing client connection must never
be able to take that port as its source port (which `bind(0)` ports would allow).
"""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

from driftlab.harness.history.waiting import wait_until

LOOPBACK = "127.0.0.1"
_LOW, _HIGH = 20000, 32000  # below the default ephemeral range 32768-60999
_handed_out: set[int] = set()
_lock = threading.Lock()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def port_is_free(port: int, host: str = LOOPBACK, *, allow_time_wait: bool = False) -> bool:
    """Whether `port` can be bound on `host` right now.

    Strict by default: connections in TIME_WAIT on the port count as taken. With
    `allow_time_wait`, only live sockets do, as for a server that sets SO_REUSEADDR
    (all of ours do): the right test for "is a killed service's port released".
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if allow_time_wait:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = LOOPBACK) -> int:
    """A port that is bindable now and not handed out before by this process.

    Ports are drawn at random so that several stacks on one machine rarely race for
    the same port; the caller binds it soon after.
    """
    eph_low, eph_high = _ephemeral_range()
    candidates = [p for p in range(_LOW, _HIGH) if not eph_low <= p <= eph_high]
    rng = random.SystemRandom()
    with _lock:
        for _ in range(200):
            port = rng.choice(candidates)
            if port not in _handed_out and port_is_free(port, host):
                _handed_out.add(port)
                return port
    raise OSError(f"no free loopback port found in {_LOW}-{_HIGH} after 200 tries")


def wait_port_free(
    port: int, timeout: float = 10.0, host: str = LOOPBACK, *, allow_time_wait: bool = False
) -> bool:
    """Poll until `port` is bindable; returns False if it is still taken at the deadline."""
    return bool(
        wait_until(lambda: port_is_free(port, host, allow_time_wait=allow_time_wait), timeout)
    )


def port_accepts(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on `host:port`."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_holder(port: int) -> str | None:
    """`pid N (command)` of the process listening on TCP `port`, if /proc shows it."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local_address is HEXIP:HEXPORT; state 0A is LISTEN.
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    comm = (proc / "comm").read_text().strip()
                    return f"pid {proc.name} ({comm})"
        except OSError:
            continue
    return None
