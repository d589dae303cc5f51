"""The stack's analysis server: one warm SparkSession that analyses run folders on
request, so that `driftlab analyze` and `driftlab run` with a `driftlab up` stack pay no
JVM start.

`python -m driftlab.harness.lab.services.analysis_server --port P --secret-file F` (the stack's
`analysis` service, harness/lab/services/analysis.py, starts it). It starts Spark and its
Python workers and analyses a small synthetic run first, and listens only then, so a
healthy server is a warm one; while idle it keeps its Python workers alive with a small
job now and then (`_keep_warm`). Requests come over multiprocessing.connection on
loopback, authenticated by the stack's secret, one at a time (one SparkSession per
process):

- `{"ping": True}` -> `"pong"`, at once, also while an analysis runs (a client waiting
  on its analysis asks so whether the server is alive);
- `{"run_dir": ABSOLUTE PATH, "per_kind": N}` -> `("line", text)` for each progress
  line of the analysis, then `("done", analysis)` or `("error", exception)`.

A client that goes away (Ctrl-C) cancels its analysis: its Spark jobs are cancelled and
the run folder gets no outputs, as with an interrupted analysis in process.

No client can stop or stall the server: the accept loop only accepts, and each
connection is handled in a thread of its own, which drops a client that fails the
handshake (a wrong key) or sends nothing for `IDLE_TIMEOUT_S` seconds. Analyses still
run one at a time.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import pickle
import socket
import struct
import tempfile
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import (
    Connection,
    Listener,
    answer_challenge,
    deliver_challenge,
)
from pathlib import Path
from typing import Any

from rich.console import Console

from driftlab.checkers.kinds import DUPLICATE_DELIVERY
from driftlab.harness.lab.services.ports import LOOPBACK

log = logging.getLogger("driftlab.analysis_server")

KEEP_WARM_S = 40
"""How often an idle server runs one small job, within Spark's minute before it stops
an idle Python worker."""
IDLE_TIMEOUT_S = 10
"""How long a client may stay silent where the server waits for it (the handshake, its
request): the real client answers at once."""


class _Lines(io.TextIOBase):
    """A text stream that sends what the analysis prints to the client, line by line."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def write(self, text: str) -> int:
        # A client that is gone is the watcher's to handle (it cancels the jobs): rich
        # would answer a BrokenPipeError with SystemExit, ending the server.
        if text:
            with contextlib.suppress(EOFError, OSError):
                self.conn.send(("line", text))
        return len(text)


def _watch(conn: Connection, done: threading.Event, cancel: Any) -> None:
    """Cancel the running jobs when the client goes away before the analysis is done
    (the client sends nothing else meanwhile: anything readable is its end)."""
    while not done.is_set():
        try:
            if conn.poll(0.2):
                conn.recv()
        except (EOFError, OSError):
            if not done.is_set():
                log.info("the client went away: cancelling its analysis")
                cancel()
            return


def _read_request(conn: Connection) -> dict[str, Any]:
    request = conn.recv()
    if not isinstance(request, dict):
        raise ValueError(f"a request is a dict, not {type(request).__name__}")
    return request


def _serve_one(conn: Connection, request: dict[str, Any], master: str | None) -> None:
    from driftlab.checkers.analyze import analyze
    from driftlab.checkers.session import get_spark

    if not isinstance(request.get("run_dir"), str) or not isinstance(request.get("per_kind"), int):
        raise ValueError('a request holds "run_dir" (a path) and "per_kind" (an int)')
    run_dir = Path(request["run_dir"])
    log.info("analysing %s", run_dir)
    done = threading.Event()
    sc = get_spark(master).sparkContext
    watcher = threading.Thread(target=_watch, args=(conn, done, sc.cancelAllJobs), daemon=True)
    watcher.start()
    console = Console(file=_Lines(conn), highlight=False, width=100, force_terminal=False)
    try:
        result = analyze(run_dir, master, console=console, per_kind=request["per_kind"])
    except Exception as exc:  # the client reports it as an analysis in process would
        log.warning("analysis of %s failed", run_dir, exc_info=True)
        done.set()
        _send_error(conn, exc)
        return
    done.set()
    # Plain data on the wire: the client validates it as analysis.json.
    conn.send(("done", result.analysis.model_dump(mode="json", by_alias=True)))


def _send_error(conn: Connection, exc: Exception) -> None:
    """The exception itself when it pickles (the client maps it to its exit code and
    line), else a RuntimeError with its text."""
    try:
        pickle.dumps(exc)
    except Exception:  # Py4J errors hold a gateway client: they do not pickle
        exc = RuntimeError(str(exc))
    # A client that is gone had its analysis cancelled: nobody to tell.
    with contextlib.suppress(EOFError, OSError):
        conn.send(("error", exc))


def serve(port: int, secret: bytes, master: str | None = None) -> None:
    """Start Spark and its Python workers, then answer requests until killed."""
    from driftlab.checkers.session import get_spark
    from driftlab.checkers.spark_start import start_workers

    log.info("starting Spark (%s)", master or "local[*]")
    # Spark's own log lines go to this process's stderr: the service's log.
    sc = get_spark(master).sparkContext
    start_workers(sc)
    _first_analysis(master)
    one_at_a_time = threading.Lock()  # one SparkSession: one analysis at a time
    threading.Thread(
        target=_keep_warm, args=(sc, one_at_a_time), name="keep-warm", daemon=True
    ).start()
    # No authkey here: the handshake runs in each connection's thread, where a client
    # that never answers it stalls that thread alone.
    with Listener((LOOPBACK, port), backlog=16) as listener:
        log.info("listening on %s:%d", LOOPBACK, port)
        while True:
            try:
                conn = listener.accept()
            except OSError as e:
                log.warning("accept failed: %s", e)
                continue
            threading.Thread(
                target=_handle, args=(conn, secret, master, one_at_a_time), daemon=True
            ).start()


def _first_analysis(master: str | None) -> None:
    """Analyse a small synthetic run before serving: the first pass of a new JVM
    compiles and loads what every later one reuses, seconds that the first run's
    verdict would pay otherwise. A failure here is logged; the first request says what
    is wrong with Spark."""
    from driftlab.checkers.analyze import analyze
    from driftlab.harness.lab.testing.synthetic import generate_history

    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="driftlab-warm-") as scratch:
            run = Path(scratch) / "run"
            generate_history(run, events=2_000, seed=0, plant={DUPLICATE_DELIVERY: 1})
            analyze(run, master)
    except Exception as e:
        log.warning("the first analysis failed: %s", e, exc_info=True)
        return
    log.info("warm: a first analysis took %.1f s", time.monotonic() - started)


def _keep_warm(sc: Any, serving: threading.Lock) -> None:
    """Every KEEP_WARM_S seconds while no analysis runs, one small job on the Python
    workers: Spark stops a worker idle for a minute, and a new one imports the pass
    again, seconds of the next verdict on a loaded machine."""
    from driftlab.checkers.spark_start import start_workers

    while True:
        time.sleep(KEEP_WARM_S)
        if not serving.acquire(blocking=False):
            continue  # an analysis keeps them busy
        try:
            start_workers(sc)
        except Exception as e:  # the next analysis says what is wrong with Spark
            log.warning("keeping the Python workers warm failed: %s", e)
        finally:
            serving.release()


def _handle(conn: Connection, secret: bytes, master: str | None, serving: threading.Lock) -> None:
    """One connection: the handshake, then its request, each within IDLE_TIMEOUT_S."""
    with conn:
        limit_reads(conn, IDLE_TIMEOUT_S)
        try:
            deliver_challenge(conn, secret)
            answer_challenge(conn, secret)
        except (AuthenticationError, EOFError, OSError) as e:
            log.warning("refused a connection: %s", e or type(e).__name__)
            return
        try:
            if not conn.poll(IDLE_TIMEOUT_S):
                log.warning("dropped a client that sent no request in %d s", IDLE_TIMEOUT_S)
                return
            request = _read_request(conn)
            if request.get("ping"):
                # Answered beside a running analysis: a client waiting on one asks
                # whether the server is alive, and a busy server is.
                conn.send("pong")
                return
            with serving:
                _serve_one(conn, request, master)
        except (EOFError, OSError) as e:  # the client is gone
            log.warning("dropped a request: %s", e)
        except Exception as e:  # one unreadable request must not end the server
            log.warning("refused a malformed request: %s", e, exc_info=True)
            # A builtin exception: this module runs as __main__, whose classes the
            # client could not unpickle.
            _send_error(conn, ValueError(f"malformed request: {e}"))


def limit_reads(conn: Connection, seconds: float) -> None:
    """Make a blocking read of `conn` fail after `seconds` of silence (SO_RCVTIMEO):
    the handshake's reads cannot be given a timeout otherwise. The client's connections
    are limited so too (driftlab.harness.lab.services.analysis)."""
    whole = int(seconds)
    timeout = struct.pack("ll", whole, int((seconds - whole) * 1_000_000))
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeout)
    finally:
        sock.close()  # the duplicate only; the option stays on the socket


def main() -> None:
    """The server's command line."""
    parser = argparse.ArgumentParser(prog="python -m driftlab.harness.lab.services.analysis_server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret-file", type=Path, required=True)
    parser.add_argument("--spark-master", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    serve(args.port, args.secret_file.read_bytes().strip(), args.spark_master)


if __name__ == "__main__":
    main()
