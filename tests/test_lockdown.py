"""A locked-down lab: PostgreSQL accepts no local user without its password, Toxiproxy's
API is the stack user's alone, and nothing of an analysis listens beyond loopback."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.services.binaries import POSTGRES_BIN
from harness.services.postgres import PostgresService
from harness.services.stack import Stack
from harness.services.toxiproxy import ToxiproxyService


def _listening(pid: int) -> list[str]:
    """Local addresses (hex, as /proc/net shows them) of the TCP sockets `pid` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append(fields[1])
    return found


LOOPBACK_HEX = ("0100007F", "0000000000000000FFFF00000100007F")  # 127.0.0.1, ::ffff:127.0.0.1


@pytest.mark.spark
def test_the_spark_driver_listens_on_loopback_only(spark: Any) -> None:
    session = spark
    session.range(10).count()  # the block manager is up once a job has run
    jvm = session.sparkContext._gateway.proc.pid
    addresses = _listening(jvm)
    assert addresses, "the JVM listens on nothing: the check would prove nothing"
    outside = [a for a in addresses if a.rsplit(":", 1)[0] not in LOOPBACK_HEX]
    assert not outside, f"listening beyond loopback: {outside}"


@pytest.mark.services
def test_postgres_trusts_no_local_user(stack: Stack) -> None:
    stack.up("postgres")
    pg = stack["postgres"]
    assert isinstance(pg, PostgresService)
    hba = (pg.data_dir / "pg_hba.conf").read_text()
    rules = [line.split() for line in hba.splitlines() if line and not line.startswith("#")]
    assert rules and all(rule[-1] == "scram-sha-256" for rule in rules), hba
    assert stat.S_IMODE(pg.socket_dir.stat().st_mode) == 0o700
    if os.geteuid() != 0:
        return  # the probe below needs another account to run as
    # Any other local account, through the socket or TCP, without the password: refused.
    psql = str(POSTGRES_BIN / "psql")
    port = str(pg.spec.port())
    for host in (str(pg.socket_dir), "127.0.0.1"):
        done = subprocess.run(
            ["su", "nobody", "-s", "/bin/sh", "-c", f"{psql} -w -h {host} -p {port} "
             "-U driftlab -d driftlab -c 'SELECT usesuper FROM pg_user'"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode != 0, done.stdout
        assert "Permission denied" in done.stderr or "no password supplied" in done.stderr


# Run as another account: how far a stranger gets with the stack's Toxiproxy. It may
# enter the service's folder and reach a link's port (loopback is open to all), but
# connecting to the API's socket must fail.
STRANGER_PROBE = """
import os, socket, sys
api, link_port = sys.argv[1], int(sys.argv[2])
os.stat(os.path.dirname(os.path.dirname(api)))
print("entered the service folder")
socket.create_connection(("127.0.0.1", link_port), timeout=5).close()
print("reached the link")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect(api)
    sock.sendall(b"GET /proxies HTTP/1.0\\r\\n\\r\\n")
    print("API answered:", sock.recv(200))
except OSError as exc:
    print("API refused:", type(exc).__name__)
"""


@pytest.mark.services
def test_toxiproxy_api_is_closed_to_other_local_users(stack: Stack) -> None:
    stack.up("redis")
    link = stack.link("app", "redis")
    toxiproxy = stack["toxiproxy"]
    assert isinstance(toxiproxy, ToxiproxyService)
    api = toxiproxy.socket_path
    assert stat.S_ISSOCK(api.stat().st_mode)
    assert stat.S_IMODE(api.parent.stat().st_mode) == 0o700
    # No API on TCP: the server's only listeners are its links'.
    assert toxiproxy.process is not None
    ports = {int(a.rsplit(":", 1)[1], 16) for a in _listening(toxiproxy.process.pid)}
    assert link.port in ports
    assert ports == {info["port"] for info in stack.links_made.values()}
    # The lab's own client lists the links and adds and removes a toxic.
    link_name = "app->redis"
    stack.links.latency(link_name, 50)
    assert [i.toxics for i in stack.links.list() if i.name == link_name] == [
        ("latency_downstream", "latency_upstream")
    ]
    stack.links.heal(link_name)
    assert [i.toxics for i in stack.links.list() if i.name == link_name] == [()]
    if os.geteuid() != 0:
        return  # the probe below needs another account to run as
    done = subprocess.run(
        ["su", "nobody", "-s", "/bin/sh", "-c",
         f"/usr/bin/python3 -c '{STRANGER_PROBE}' {api} {link.port}"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert "entered the service folder" in said, said
    assert "reached the link" in said, said
    assert "API refused: PermissionError" in said, said
    assert [i.toxics for i in stack.links.list() if i.name == link_name] == [()]
