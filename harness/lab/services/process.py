"""A supervised OS process: one service's process group, its log, its signals.

Every service runs in a session (and so a process group) of its own, so that one signal
reaches the server and every helper it forked (PostgreSQL backends, Erlang's port
programs), and a Ctrl-C in the terminal never reaches it directly. Output goes to a log
file in the stack's folder. A process can be adopted from a state file by another
harness process (`driftlab status`, `driftlab down`), which then signals it by pid with
a start-time check, so a recycled pid is never signalled by mistake.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict

from driftlab.harness.history.uninterrupted import uninterrupted
from driftlab.harness.history.waiting import because, wait_until
from driftlab.harness.lab.services.base import ServiceError

LOG_TAIL_LINES = 25

HARNESS_NOTE = "--- driftlab: "
"""How the lines the harness itself writes into a process's log begin (the command line
it starts, a stop that needed SIGKILL): never the process's own words."""


def starting_note(argv: list[str], where: str = "") -> bytes:
    """The harness's note that opens a start's log: its command line on one line (an
    argument's own newlines written `\\n`), so no line of a script passed as `bash -c`
    reads as the process's output."""
    command = " ".join(argv).replace("\n", "\\n")
    return f"{HARNESS_NOTE}starting {where}{command}\n".encode()


class StopOptions(TypedDict, total=False):
    """How a supervised process is stopped (SupervisedProcess's defaults otherwise)."""

    stop_signal: int
    stop_timeout: float


class ProcessOptions(StopOptions, total=False):
    """How a supervised process is launched and stopped: SupervisedProcess's keywords,
    which a runtime passes on."""

    env: Mapping[str, str] | None
    cwd: Path | None
    user: str | None
    die_with_parent: bool


class RunOptions(TypedDict, total=False):
    """How a runtime runs a one-off command: in which folder, as whom, for how long at
    most (None: no limit of its own)."""

    cwd: Path | None
    user: str | None
    timeout: float | None


_PR_SET_PDEATHSIG = 1
# Resolved before any fork: the child may only make the bare prctl call.
_libc = ctypes.CDLL(None, use_errno=True)


def read_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (None if it does not exist).

    Together with the pid it names one process for good: a recycled pid has a later
    start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None  # a zombie has finished; only its exit status remains
    return int(fields[19])


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still exists (zombies excluded)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a whole process group; a group that is already gone is not an error."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn: SIGKILL this child when the forking *thread* of the parent exits.

    Runs after the uid switch (CPython calls preexec_fn last), which matters: a
    credential change clears the parent-death signal.
    """

    def preexec() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died between fork and prctl
            os._exit(1)

    return preexec


_launcher: ThreadPoolExecutor | None = None
_launcher_lock = threading.Lock()


def _from_long_lived_thread(
    launch: Callable[[], subprocess.Popen[bytes]],
) -> subprocess.Popen[bytes]:
    """Run `launch` in a thread that lives as long as the process.

    The parent-death signal fires when the forking thread exits: a service restarted
    from a short-lived thread (a nemesis step, a probe pool) would be killed as soon as
    that thread ended. The main thread lives long enough; other threads hand the fork
    to one launcher thread kept for the life of the process.
    """
    global _launcher
    if threading.current_thread() is threading.main_thread():
        return launch()
    with _launcher_lock:
        if _launcher is None:
            _launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="driftlab-launcher")
    return _launcher.submit(launch).result()


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """What a state file keeps of a running process."""

    pid: int
    pgid: int
    start_time: int
    log_path: str

    def to_json(self) -> dict[str, Any]:
        """The record as the state file keeps it."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessRecord:
        return cls(int(data["pid"]), int(data["pgid"]), int(data["start_time"]), data["log_path"])


class SupervisedProcess:
    """One OS process (and its group) started and watched by the harness.

    `argv` is launched in a new session; stdout and stderr are appended to `log_path`.
    `user` runs it as that unprivileged account (when the harness is root).
    `die_with_parent` kills it when the launching thread dies (PR_SET_PDEATHSIG); the
    stack's reaper covers the rest of the group. `stop_signal` goes to the leader for a
    graceful stop, escalated to SIGKILL of the group after `stop_timeout` seconds.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
        die_with_parent: bool = False,
        stop_signal: int = signal.SIGTERM,
        stop_timeout: float = 15.0,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.user = user
        self.die_with_parent = die_with_parent
        self.stop_signal = stop_signal
        self.stop_timeout = stop_timeout
        self._popen: subprocess.Popen[bytes] | None = None
        self.record: ProcessRecord | None = None

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> ProcessRecord:
        """Launch the process; returns its record once it exists (not once it is ready)."""
        if self.is_running():
            raise ServiceError(f"{self.name}: already running as pid {self.pid}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        kwargs: dict[str, Any] = {}
        if self.user is not None and os.geteuid() == 0:
            entry = pwd.getpwnam(self.user)
            kwargs.update(user=entry.pw_uid, group=entry.pw_gid, extra_groups=[])
        if self.die_with_parent:
            kwargs["preexec_fn"] = die_with_parent(os.getpid())
        with open(self.log_path, "ab") as log:
            log.write(starting_note(self.argv))
            log.flush()

            def launch() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    cwd=self.cwd,
                    start_new_session=True,
                    close_fds=True,
                    **kwargs,
                )

            # A signal between the fork and the record would leave a process no stop
            # can find: it is raised once the record exists.
            with uninterrupted():
                try:
                    self._popen = (
                        _from_long_lived_thread(launch) if self.die_with_parent else launch()
                    )
                except OSError as exc:
                    raise ServiceError(f"{self.name}: cannot launch {self.argv[0]}: {exc}") from exc
                pid = self._popen.pid
                self.record = ProcessRecord(pid, pid, read_start_time(pid) or 0, str(self.log_path))
        return self.record

    @classmethod
    def adopt(cls, name: str, record: ProcessRecord, **kwargs: Any) -> SupervisedProcess:
        """A handle on a process started by another harness process (from a state file)."""
        proc = cls(name, [], Path(record.log_path), **kwargs)
        proc.record = record
        return proc

    @property
    def pid(self) -> int | None:
        return self.record.pid if self.record else None

    def is_running(self) -> bool:
        """Whether the leader is alive (a stopped, paused process counts as alive)."""
        if self.record is None:
            return False
        if self._popen is not None:
            return self._popen.poll() is None
        return read_start_time(self.record.pid) == self.record.start_time

    def returncode(self) -> int | None:
        """The leader's exit status if it was our child and has exited."""
        return self._popen.poll() if self._popen is not None else None

    def _wait_exit(self, timeout: float) -> bool:
        return bool(wait_until(lambda: not self.is_running(), timeout, interval=0.05))

    def signal_group(self, sig: int) -> None:
        """Send `sig` to the whole process group (no-op if it is gone)."""
        if self.record is None:
            return
        # An adopted leader that has died leaves a pgid that the kernel keeps reserved
        # only while stragglers of ours remain; with none, the number may be anyone's.
        if self._popen is None and not self.is_running() and not group_alive(self.record.pgid):
            return
        kill_group(self.record.pgid, sig)

    def kill(self) -> None:
        """SIGKILL to the group, as a crash, and wait until the leader is reaped."""
        if self.record is None:
            return
        self.signal_group(signal.SIGKILL)
        self._wait_exit(10.0)
        self._wait_group_gone(5.0)

    def pause(self) -> None:
        """SIGSTOP to the group: every process freezes, sockets stay open."""
        self.signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT to the group."""
        self.signal_group(signal.SIGCONT)

    def stop(self, timeout: float | None = None) -> None:
        """Graceful stop: `stop_signal` to the leader, SIGKILL to the group if it lingers."""
        if self.record is None:
            return
        timeout = self.stop_timeout if timeout is None else timeout
        if self.is_running():
            self.signal_group(signal.SIGCONT)  # a paused process cannot act on SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.record.pid, self.stop_signal)
            if not self._wait_exit(timeout):
                self._log_note(f"did not stop within {timeout:.0f}s; sending SIGKILL")
        # Helpers the leader left behind (or the leader itself) go down with the group.
        self.signal_group(signal.SIGKILL)
        self._wait_exit(10.0)
        self._wait_group_gone(5.0)

    def _wait_group_gone(self, timeout: float) -> None:
        assert self.record is not None
        pgid = self.record.pgid
        wait_until(lambda: not group_alive(pgid), timeout, interval=0.05)

    # --- readiness ---------------------------------------------------------------------

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the log, for error messages."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                size = log.tell()
                log.seek(max(0, size - 16384))
                text = log.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _log_note(self, note: str) -> None:
        with open(self.log_path, "a") as log:
            log.write(f"{HARNESS_NOTE}{self.name} {note}\n")

    def failure(self, problem: str) -> ServiceError:
        """A ServiceError naming the problem, the log file and quoting its tail."""
        return ServiceError(
            f"{self.name}: {problem}\n"
            f"log {self.log_path} ends with:\n{self.log_tail()}\n"
            f"(see the whole log for the cause)"
        )

    def wait_until(
        self, probe: Callable[[], object], timeout: float, what: str, interval: float = 0.1
    ) -> object:
        """Call `probe` until it returns a truthy value without raising.

        Returns that value. Raises ServiceError quoting the log tail if the process exits
        first or the deadline passes; the last probe error is included.
        """
        last: list[Exception] = []  # the probe's last error, for the messages

        def ready() -> object:
            if not self.is_running():
                code = self.returncode()
                raise self.failure(f"exited (status {code}) before {what}{because(last)}")
            try:
                return probe()
            except Exception as exc:  # any client error means "not ready yet"
                last[:] = [exc]
                return None

        if not (answer := wait_until(ready, timeout, interval)):
            raise self.failure(f"not ready after {timeout:.0f}s waiting for {what}{because(last)}")
        return answer

    def wait_for_port(self, port: int, timeout: float, host: str = "127.0.0.1") -> None:
        """Block until `host:port` accepts a TCP connection."""

        def accepts() -> bool:
            with socket.create_connection((host, port), timeout=1.0):
                return True

        self.wait_until(accepts, timeout, f"a listener on {host}:{port}")
