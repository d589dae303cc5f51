"""The one SparkSession of a process: local[*] by default, quiet, any master accepted."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from driftlab.harness.history.uninterrupted import finalizer_interrupts

_lock = threading.Lock()
_LOCAL_IP = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")


def get_spark(master: str | None = None, jvm_log: Path | None = None) -> SparkSession:
    """Return the process's SparkSession, creating it on first use.

    `master` is any Spark master URL (`local[*]`, `spark://host:7077`); the default is
    `$DRIFTLAB_SPARK_MASTER` or `local[*]`. A later call with another master gets the
    existing session: one session per process. A JVM started here writes its stderr
    (Spark's own log lines) to `jvm_log` when given, else to the process's stderr.
    """
    with _lock:
        # The session another thread started (spark_start starts it aside) is active on
        # that thread only: asked from here, the builder re-applied every setting of
        # _conf to it, 76 calls into the JVM per analysis, each a wait for the JVM's
        # thread to run (under load, a wait for a core).
        made = SparkSession._instantiatedSession
        if made is not None and SparkContext._active_spark_context is not None:
            return made
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        url = master or os.environ.get("DRIFTLAB_SPARK_MASTER", "local[*]")
        # The keyed pass runs driftlab's checks in Python workers: they need this
        # environment's packages (pyarrow, driftlab itself), not the system python3.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        in_main = threading.current_thread() is threading.main_thread()
        sigint = signal.getsignal(signal.SIGINT) if in_main else None
        conf = _conf(url)
        if SparkContext._active_spark_context is None:
            # The JVM gets the log as its own stderr: redirecting the process's fd 2
            # while it starts swallowed whatever another thread printed meanwhile (a
            # run's error message, when Spark started beside the run).
            gateway = None
            if jvm_log is not None and SparkContext._gateway is None:
                with open(jvm_log, "ab") as log:
                    gateway = launch_gateway(conf, popen_kwargs={"stderr": log})
            SparkContext(conf=conf, gateway=gateway)
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        if in_main:
            # PySpark replaces the SIGINT handler with one that cancels the running jobs
            # only, so an analysis went on with its next ones: keep the caller's
            # (`interruptible` stops the whole context instead).
            signal.signal(signal.SIGINT, sigint)
        return spark


_SOCKET_NAME = "/.01234567-89ab-cdef-0123-456789abcdef.sock"
"""The shape of the name Spark gives a Python worker's socket file (a random UUID)."""
_SOCKET_PATH_MAX = 108
"""The longest path a Unix domain socket may have (sun_path), its final NUL included."""


def _conf(url: str) -> SparkConf:
    """The session's settings for the master `url`."""
    conf = SparkConf().setAll(
        [
            ("spark.master", url),
            ("spark.app.name", "driftlab"),
            ("spark.ui.enabled", "false"),
            # The driver and its block manager listen on loopback only (Spark's default
            # is the machine's external address); SPARK_LOCAL_IP chooses another.
            ("spark.driver.host", _LOCAL_IP),
            ("spark.driver.bindAddress", _LOCAL_IP),
            ("spark.ui.showConsoleProgress", "false"),
            # pyspark's daemon re-read Spark's zips and jar before every task: ours
            # takes them off the workers' import path (checkers/worker_daemon.py).
            ("spark.python.daemon.module", "driftlab.checkers.worker_daemon"),
            # Each task's handover to its Python worker and back went through a TCP
            # socket on loopback: some 50 ms a task, twelve Python tasks of nothing on
            # 2 cores 0.43 s. Through a Unix domain socket: 0.16 s.
            ("spark.python.unix.domain.socket.enabled", "true"),
            # Histories are modest per run; few shuffle partitions keep 2 cores busy
            # without drowning them in scheduling overhead.
            ("spark.sql.shuffle.partitions", os.environ.get("DRIFTLAB_SHUFFLE", "8")),
            ("spark.sql.session.timeZone", "UTC"),
            ("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR"),
        ]
    )
    scratch = scratch_dir()
    # SPARK_LOCAL_DIRS, when set, is the user's choice and wins over spark.local.dir.
    if "SPARK_LOCAL_DIRS" not in os.environ:
        conf.set("spark.local.dir", str(scratch))
    sockets = socket_dir(url, scratch)
    if sockets is not None:
        conf.set("spark.python.unix.domain.socket.dir", str(sockets))
    return conf


def socket_dir(url: str, scratch: Path) -> Path | None:
    """Where the session of master `url` puts its Python workers' socket files: this
    process's scratch folder `scratch`, or None for Spark's default (/tmp).

    Spark leaves a socket file or two of each session behind: in the scratch folder, a
    later analysis removes them with it. Only with a local master (a cluster's executors
    have no such folder), and only while a socket's path stays within the system's limit.
    """
    if url.startswith("local") and len(str(scratch)) + len(_SOCKET_NAME) < _SOCKET_PATH_MAX:
        return scratch
    return None


def scratch_dir(root: Path | None = None) -> Path:
    """This process's folder for Spark's scratch files (shuffle blocks, the Python
    workers' files), below `root` (the system's temporary folder by default).

    Spark deletes its scratch folders when its JVM exits, but not when the JVM is
    killed, as a lab that kills process groups does: a killed analysis of the 5M
    benchmark history leaves up to its 280 MB of shuffle blocks. So each process gets
    a folder named by its pid, and the folders of processes no longer alive are
    removed first.
    """
    base = (root or Path(tempfile.gettempdir())) / f"driftlab-spark-{os.getuid()}"
    base.mkdir(parents=True, exist_ok=True)
    for old in base.iterdir():
        if old.name.isdigit() and int(old.name) != os.getpid() and not _alive(int(old.name)):
            shutil.rmtree(old, ignore_errors=True)
    mine = base / str(os.getpid())
    mine.mkdir(exist_ok=True)
    return mine


def _alive(pid: int) -> bool:
    """Whether a process `pid` exists (another user's process counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_LOCAL = re.compile(r"^local(\[(\*|\d+)(,\s*\d+)?\])?$|^local-cluster\[\d+,\s*\d+,\s*\d+\]$")
_SPARK = re.compile(r"^spark://([^,/:]+:\d+)(,[^,/:]+:\d+)*$")


class MasterUnreachable(ConnectionError):
    """A spark:// master did not accept a connection; the message names it and the fix."""


def check_master(master: str | None, timeout: float = 5.0) -> None:
    """Fail fast, before any work, on a Spark master that cannot serve the analysis.

    ValueError for a URL Spark does not accept (the message shows the forms);
    MasterUnreachable when no host of a `spark://` URL accepts a TCP connection.
    local[*], yarn and k8s:// masters are not probed.
    """
    url = master or os.environ.get("DRIFTLAB_SPARK_MASTER", "local[*]")
    if _LOCAL.match(url) or url == "yarn" or url.startswith(("k8s://", "mesos://")):
        return
    if not _SPARK.match(url):
        raise ValueError(
            f"{url!r} is not a Spark master URL; use local[*], local[N] or "
            "spark://HOST:PORT (e.g. spark://127.0.0.1:7077)"
        )
    problems = []
    for hostport in url.removeprefix("spark://").split(","):
        host, port = hostport.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except OSError as exc:
            problems.append(f"{hostport}: {exc.strerror or exc}")
    raise MasterUnreachable(
        f"Spark master {url} is not reachable ({'; '.join(problems)}); start it, "
        "or leave out --spark-master to analyse with local[*]"
    )


def stop_spark() -> None:
    """Stop the process's SparkSession, if any, from any thread: its running jobs are
    cancelled and every later job fails at once, so whatever waits on Spark returns.
    The next `get_spark` starts a new session."""
    session = SparkSession._instantiatedSession
    # Stopped in the middle of its calls (an interrupt), the JVM's stop fails and
    # PySpark warns that it may have crashed, above our own line: the JVM is ending
    # anyway (it exits when this process does), so the warning says nothing.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Unable to cleanly shutdown Spark JVM", RuntimeWarning)
        if session is not None:
            session.stop()  # also forgets the session, unlike stopping its context alone
        elif SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()


def task_progress() -> tuple[int, int] | None:
    """The tasks done, and in all, of the stages of this process's running Spark jobs;
    None while no job runs here (or Spark does not answer: it may be stopping)."""
    sc = SparkContext._active_spark_context
    if sc is None:
        return None
    try:
        tracker = sc.statusTracker()
        stages = [
            tracker.getStageInfo(stage)
            for job in tracker.getActiveJobsIds()
            for stage in getattr(tracker.getJobInfo(job), "stageIds", ())
        ]
    except Exception:  # py4j's errors while the JVM stops: a display must not fail
        return None
    known = [s for s in stages if s is not None]
    total = sum(s.numTasks for s in known)
    return (sum(s.numCompletedTasks for s in known), total) if total else None


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM during the block stop Spark and raise KeyboardInterrupt.

    A KeyboardInterrupt alone reaches only the main thread: Spark jobs started from
    other threads, and the analysis steps after the interrupted one, would go on and
    the process would wait for them. Off the main thread this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    interrupted = False

    def handle(_signum: int, _frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        stop_spark()
        raise KeyboardInterrupt

    old = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # The handler may run inside a finalizer (py4j's weakref callbacks free Java
        # objects), which drops what it raises: the interrupt is raised on leaving.
        with finalizer_interrupts(lambda: interrupted):
            yield
    except Exception as exc:
        # Raised inside a Spark call, the KeyboardInterrupt meets a context already
        # stopped, and PySpark's cleanup raises over it (`_jsc` is None): still the
        # interrupt, not a failed analysis.
        if interrupted:
            raise KeyboardInterrupt from exc
        raise
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if interrupted:
        raise KeyboardInterrupt
