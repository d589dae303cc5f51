"""The stack's `analysis` service: a warm Spark kept with the local stack
(harness/services/analysis_server.py), and the client `driftlab analyze` uses when the
stack of `driftlab up` runs it.

A cold `driftlab analyze` starts a JVM and its Python workers before its first job: on
this 2-core machine that is most of a small run's verdict. The service pays it once, when
`driftlab up` starts it; each analysis then costs what the pass costs.
"""

from __future__ import annotations

import sys
from multiprocessing.connection import Client
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from harness.rundir import RunDir
from harness.services.base import Endpoint
from harness.services.ports import LOOPBACK
from harness.services.supervised import ProcessService, write_private

ANALYSIS = "analysis"


class AnalysisService(ProcessService):
    """`python -m harness.services.analysis_server` on loopback, authenticated by a
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
            "harness.services.analysis_server",
            "--port",
            str(self.spec.port()),
            "--secret-file",
            str(self.secret_path),
        ]

    def endpoint(self) -> Endpoint:
        return Endpoint(LOOPBACK, self.spec.port(), {"secret": self.spec.secret()})

    def probe(self) -> bool:
        with _connect(self.endpoint()) as conn:
            conn.send({"ping": True})
            return bool(conn.recv() == "pong")


def _connect(endpoint: Endpoint) -> Any:
    return Client((endpoint.host, endpoint.port), authkey=endpoint.extra["secret"].encode())


def analyze_remotely(endpoint: Endpoint, run_dir: Path, console: Console, per_kind: int) -> Any:
    """Analyse `run_dir` on the analysis server at `endpoint`, its progress lines on
    `console`; returns its checkers.analyze.AnalysisResult, or raises what the analysis
    raised there. Interrupted (KeyboardInterrupt), the connection closes and the server
    cancels the analysis."""
    from checkers.analyze import AnalysisResult

    with _connect(endpoint) as conn:
        conn.send({"run_dir": str(run_dir.absolute()), "per_kind": per_kind})
        while True:
            what, payload = conn.recv()
            if what == "line":
                console.print(escape(payload), end="")
            elif what == "done":
                return AnalysisResult(RunDir(payload["run"]["run_dir"]), payload)
            else:
                raise payload
