"""PostgreSQL 15 with logical decoding, as the lab's system of record."""

from __future__ import annotations

import os
import pwd
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import psycopg.sql

from driftlab.harness.lab.services.base import Endpoint, ServiceError
from driftlab.harness.lab.services.ports import LOOPBACK
from driftlab.harness.lab.services.supervised import ProcessService, ServiceSpec

SUPERUSER = "driftlab"
DATABASE = "driftlab"
UNIX_SOCKET_MAX = 100  # sun_path holds 107 bytes, minus "/.s.PGSQL.nnnnn"

SOCKET_DIR = "socket"  # in the service's data folder, mode 700: only the server's account

# No `trust` line: any local account could otherwise connect as the superuser.
PG_HBA = """\
# Written by driftlab (rewritten at every start): passwords only, loopback and socket.
local   all          all                  scram-sha-256
local   replication  all                  scram-sha-256
host    all          all   127.0.0.1/32   scram-sha-256
host    replication  all   127.0.0.1/32   scram-sha-256
"""


class PostgresService(ProcessService):
    """PostgreSQL in its own data folder: wal_level=logical, fsync on, loopback only.

    The server refuses to run as root, so when the harness is root it runs as the
    `driftlab` system account, which owns the data folder.
    """

    stop_signal = signal.SIGINT  # "fast" shutdown: abort sessions, checkpoint, exit
    stop_timeout = 30.0

    def __init__(self, spec: ServiceSpec) -> None:
        super().__init__(spec)
        self.run_as = SUPERUSER if os.geteuid() == 0 else None

    @property
    def data_dir(self) -> Path:
        return self.spec.data_dir / "pgdata"

    @property
    def socket_dir(self) -> Path:
        """The private folder of the server's unix socket."""
        return self.spec.data_dir / SOCKET_DIR

    def prepare(self) -> None:
        self.spec.runtime.binary("postgres")  # a missing program is named now
        self.spec.data_dir.mkdir(parents=True, exist_ok=True)
        socket_path = f"{self.socket_dir}/.s.PGSQL.{self.spec.port()}"
        if len(socket_path) > UNIX_SOCKET_MAX:
            raise ServiceError(
                f"postgres: the unix socket path {socket_path} is too long "
                f"({len(socket_path)} > {UNIX_SOCKET_MAX}); choose a shorter stack folder"
            )
        self.socket_dir.mkdir(exist_ok=True)
        self.socket_dir.chmod(0o700)
        if self.run_as is not None:
            ensure_system_user(self.run_as)
            _check_traversable(self.spec.data_dir, self.run_as)
            _chown_tree(self.spec.data_dir, self.run_as, only_root=True)
            _chown_tree(self.socket_dir, self.run_as, only_root=True)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        # Also on a data folder made by an older driftlab, whose file trusted the socket.
        hba = self.data_dir / "pg_hba.conf"
        hba.write_text(PG_HBA)
        if self.run_as is not None:
            _chown_tree(hba, self.run_as)

    def _initdb(self) -> None:
        pwfile = self.spec.data_dir / "initdb.pw"
        pwfile.write_text(self.spec.secret() + "\n")
        if self.run_as is not None:
            _chown_tree(pwfile, self.run_as)
        argv = [
            self.spec.runtime.binary("initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            SUPERUSER,
            f"--pwfile={pwfile}",
            "--auth-local=scram-sha-256",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            # Only initdb's own files skip fsync; the server runs with fsync on.
            "--no-sync",
        ]
        status = self.spec.runtime.run(
            argv, self.log_path, cwd=self.spec.data_dir, user=self.run_as
        )
        pwfile.unlink()
        if status != 0:
            raise ServiceError(f"postgres: initdb failed (status {status}); see {self.log_path}")

    def command(self) -> list[str]:
        settings = {
            "listen_addresses": LOOPBACK,
            "port": str(self.spec.port()),
            "unix_socket_directories": str(self.socket_dir),
            "unix_socket_permissions": "0700",
            "wal_level": "logical",
            "max_replication_slots": "20",
            "max_wal_senders": "20",
            "fsync": "on",
            "synchronous_commit": "on",
            "full_page_writes": "on",
            "max_connections": "200",
            "shared_buffers": "64MB",
            "logging_collector": "off",
            "log_min_messages": "warning",
        }
        argv = [self.spec.runtime.binary("postgres"), "-D", str(self.data_dir)]
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        return argv

    def environment(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}

    def endpoint(self) -> Endpoint:
        return Endpoint(
            LOOPBACK,
            self.spec.port(),
            {"user": SUPERUSER, "password": self.spec.secret(), "dbname": DATABASE},
        )

    def conninfo(self, dbname: str = DATABASE) -> str:
        """A libpq connection string to the server itself (not through a link)."""
        return psycopg.conninfo.make_conninfo(
            host=LOOPBACK,
            port=self.spec.port(),
            user=SUPERUSER,
            password=self.spec.secret(),
            dbname=dbname,
            connect_timeout=2,
        )

    def probe(self) -> bool:
        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)

    def after_healthy(self) -> None:
        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if exists.fetchone() is None:
                conn.execute(f"CREATE DATABASE {DATABASE}")


def ensure_system_user(user: str) -> None:
    """Create the unprivileged system account `user` if it does not exist (needs root)."""
    try:
        pwd.getpwnam(user)
        return
    except KeyError:
        pass
    done = subprocess.run(
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            user,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    # Another stack may have created it at the same moment (status 9: already exists).
    if done.returncode not in (0, 9):
        raise ServiceError(
            f"cannot create the system account '{user}' that PostgreSQL runs as: "
            f"{done.stderr.strip()}; create it with `useradd --system --user-group {user}`"
        )


def _check_traversable(path: Path, user: str) -> None:
    """The unprivileged account must be able to reach the data folder through its parents."""
    uid = pwd.getpwnam(user).pw_uid
    for parent in path.resolve().parents:
        mode = parent.stat()
        if mode.st_uid == uid:
            continue
        if not mode.st_mode & stat.S_IXOTH:
            raise ServiceError(
                f"postgres runs as the '{user}' account, which cannot enter {parent} "
                f"(mode {stat.filemode(mode.st_mode)}); put the stack folder somewhere "
                f"world-traversable, or `chmod o+x {parent}`"
            )


def _chown_tree(path: Path, user: str, only_root: bool = False) -> None:
    """Give `path` (and with `only_root` False, everything below it) to `user`."""
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    if only_root or not path.is_dir():
        return
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), entry.pw_uid, entry.pw_gid)


def drop_replication_slots(
    conn: psycopg.Connection[Any],
    name: str,
    *,
    like: bool = False,
    timeout: float = 30.0,
    terminate_after: float = 2.0,
) -> bool:
    """Drop the replication slot `name` (with `like`, every slot whose name matches the
    LIKE pattern `name`), trying again while a walsender still holds one (a deleted
    connector's task lets go of its slot a moment later); False when one is still in
    use after `timeout` seconds.

    A walsender still holding it after `terminate_after` seconds is ended: the slot is
    being dropped because its run is over, and a Debezium task whose Kafka died never
    lets go of it (it held the slot for minutes, and the next run failed on it)."""
    where = "WHERE slot_name LIKE %s" if like else "WHERE slot_name = %s"
    query = "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots " + where
    holders = (
        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
        + where
        + " AND active_pid IS NOT NULL"
    )
    begun = time.monotonic()
    while True:
        try:
            conn.execute(query, (name,))
            return True
        except psycopg.errors.ObjectInUse:
            waited = time.monotonic() - begun
            if waited >= timeout:
                return False
            if waited >= terminate_after:
                conn.execute(holders, (name,))
            time.sleep(0.3)


def drop_role(conn: psycopg.Connection[Any], role: str) -> bool:
    """Drop the login role `role` (a run's; False when there is none): its sessions
    ended (a walsender of its lets go of its slot), what it owned given to the connected
    superuser, its grants revoked."""
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    if exists is None:
        return False
    name = psycopg.sql.Identifier(role)
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
    )
    conn.execute(psycopg.sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(name))
    conn.execute(psycopg.sql.SQL("DROP OWNED BY {}").format(name))
    conn.execute(psycopg.sql.SQL("DROP ROLE {}").format(name))
    return True
