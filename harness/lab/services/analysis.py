"""The stack's `analysis` service: a warm Spark kept with the local stack
(harness/lab/services/analysis_server.py), and the client `driftlab analyze`, `run`,
`suite` and `matrix` use when the stack they use runs it.

A cold analysis starts a JVM and its Python workers before its first job: on this
2-core machine that is most of a small run's verdict. The service pays it once, when
`driftlab up` starts it; each analysis then costs what the pass costs.

The server is never a place to hang: a client gives up on a server that does not
connect within CONNECT_TIMEOUT_S, that goes away, or that says nothing for SILENCE_S and
then fails a ping (ServerUnavailable), and its caller analyses in process instead.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from driftlab.checkers.analysis_files import Analysis, validated
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.services.analysis_server import limit_reads
from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.ports import LOOPBACK
from driftlab.harness.lab.services.supervised import ProcessService, write_private

ANALYSIS = "analysis"

CONNECT_TIMEOUT_S = 5.0
"""How long the server may take to accept a connection and answer the handshake (it
does so at once; a stopped server never does)."""
SILENCE_S = 15.0
"""How long a client waits on its analysis without a word before it pings the server."""
POLL_S = 0.5
"""How often a waiting client looks at its stop event."""


class AnalysisService(ProcessService):
    """`python -m driftlab.harness.lab.services.analysis_server` on loopback, authenticated by a
    generated secret kept in a file (mode 600), not on its command line."""

    @property
    def secret_path(self) -> Path:
        return self.spec.data_dir / "secret"

    def prepare(self) -> None:
        self.spec.data_dir.mkdir(parents=True, exist_ok=True)
        write_private(self.secret_path, self.spec.secret())

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "driftlab.harness.lab.services.analysis_server",
            "--port",
            str(self.spec.port()),
            "--secret-file",
            str(self.secret_path),
        ]

    def endpoint(self) -> Endpoint:
        return Endpoint(LOOPBACK, self.spec.port(), {"secret": self.spec.secret()})

    def probe(self) -> bool:
        return ping(self.endpoint())


class ServerUnavailable(ConnectionError):
    """The analysis server could not be reached, or went silent and no longer answers
    a ping: the caller analyses in its own process instead."""


def _connect(endpoint: Endpoint, timeout: float = CONNECT_TIMEOUT_S) -> Connection:
    """An authenticated connection to the server; a server that does not connect and
    answer the handshake within `timeout` seconds (dead, stopped, its port taken by
    another program) raises OSError or AuthenticationError, never blocks for good."""
    sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
    # Connection reads its descriptor with os.read: blocking, bounded by SO_RCVTIMEO.
    sock.settimeout(None)
    conn = Connection(sock.detach())
    try:
        limit_reads(conn, timeout)
        key = endpoint.extra["secret"].encode()
        answer_challenge(conn, key)
        deliver_challenge(conn, key)
        limit_reads(conn, SILENCE_S)
    except BaseException:
        conn.close()
        raise
    return conn


def ping(endpoint: Endpoint, timeout: float = CONNECT_TIMEOUT_S) -> bool:
    """Whether the server answers a ping within about `timeout` seconds (it answers
    at once, also while it analyses)."""
    try:
        with _connect(endpoint, timeout) as conn:
            conn.send({"ping": True})
            return conn.poll(timeout) and conn.recv() == "pong"
    except (OSError, EOFError, AuthenticationError):
        return False


def analysis_on_server(
    endpoint: Endpoint,
    run_dir: Path,
    per_kind: int,
    *,
    console: Console | None = None,
    stop: threading.Event | None = None,
) -> Analysis:
    """Analyse `run_dir` on the analysis server at `endpoint` and return its
    analysis.json, the progress lines on `console` when given; raises what the
    analysis raised there. ServerUnavailable when the server cannot be reached, goes
    away, says nothing for SILENCE_S seconds and then fails a ping, or its Spark fails:
    nothing done there counts, analyse in process. Interrupted (KeyboardInterrupt, or
    `stop` set), the connection closes and the server cancels the analysis."""
    where = f"the analysis server at {endpoint.host}:{endpoint.port}"
    try:
        conn = _connect(endpoint)
    except (OSError, EOFError, AuthenticationError) as exc:
        raise ServerUnavailable(f"{where} did not answer ({_why(exc)})") from exc
    with conn:
        try:
            conn.send({"run_dir": str(run_dir.absolute()), "per_kind": per_kind})
            heard = time.monotonic()
            while True:
                if stop is not None and stop.is_set():
                    raise KeyboardInterrupt
                if not conn.poll(POLL_S):
                    if time.monotonic() - heard < SILENCE_S:
                        continue
                    # A long Spark job says nothing for a while: only a server that
                    # does not answer a ping either is given up.
                    if not ping(endpoint):
                        raise ServerUnavailable(
                            f"{where} said nothing for {SILENCE_S:.0f} s and does not answer a ping"
                        )
                    heard = time.monotonic()
                    continue
                what, payload = conn.recv()
                heard = time.monotonic()
                if what == "line":
                    if console is not None:
                        console.print(escape(payload), end="")
                elif what == "done":
                    break
                elif isinstance(payload, RuntimeError):
                    # The server's own Spark failed (its Py4J errors come so): this
                    # process's may not.
                    first = (str(payload).strip().splitlines() or ["no message"])[0][:200]
                    raise ServerUnavailable(f"{where} failed ({first})") from payload
                else:
                    raise payload
        except (OSError, EOFError) as exc:
            raise ServerUnavailable(f"{where} went away ({_why(exc)})") from exc
    # A server a `driftlab up` of another version left running is given up.
    return validated(
        Analysis,
        payload,
        lambda why: ServerUnavailable(f"{where} answered with another driftlab's analysis ({why})"),
    )


def _why(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "it closed the connection"
    if isinstance(exc, AuthenticationError):
        return "it did not take the stack's secret"
    if isinstance(exc, (TimeoutError, BlockingIOError)):
        return "no answer in time"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def analyze_remotely(endpoint: Endpoint, run_dir: Path, console: Console, per_kind: int) -> Any:
    """Analyse `run_dir` on the analysis server at `endpoint`, its progress lines on
    `console`; returns its driftlab.checkers.analyze.AnalysisResult, or raises what the analysis
    raised there (ServerUnavailable: see `analysis_on_server`). Interrupted
    (KeyboardInterrupt), the connection closes and the server cancels the analysis."""
    from driftlab.checkers.analyze import AnalysisResult

    analysis = analysis_on_server(endpoint, run_dir, per_kind, console=console)
    return AnalysisResult(RunDir(analysis.run.run_dir), analysis)
