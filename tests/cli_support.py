"""The `driftlab` command run as a user runs it (this environment's entry point, in a
subprocess), and what a user checks of a suite's index."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reference_counts import predicted

from driftlab.harness.lab.services.stack_home import ENV as STACK_DIR_ENV
from driftlab.scenarios.catalogue.registry import claims_scenarios

DRIFTLAB = str(Path(sys.executable).parent / "driftlab")


def driftlab(cwd: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`driftlab *args` in `cwd`, its output captured as text; without this
    environment's DRIFTLAB_* settings but the session's stack folder (conftest.py: never
    the user's own stack) and with a terminal wide enough for its tables."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("DRIFTLAB_") or k == STACK_DIR_ENV
    }
    env["COLUMNS"] = "120"
    return subprocess.run(
        [DRIFTLAB, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def await_while_running(
    proc: subprocess.Popen[str], reached: Callable[[], bool], what: str, timeout: float = 600
) -> None:
    """Poll until `reached()`; fail with the command's output if it exits first, or
    saying the run never reached `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not reached():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"the run never reached its {what}"
        time.sleep(0.05)


def assert_reproduced(index: dict[str, Any], claims: list[str], context: object = None) -> None:
    """The suite `index` ran each of `claims` once, and each reproduced its prediction:
    the kinds its scenario expects present found, those expected absent not."""
    by_claim = {sc.claim: sc for sc in claims_scenarios(claims)}
    assert {r["claim"] for r in index["runs"]} == set(claims)
    for r in index["runs"]:
        sc = by_claim[r["claim"]]
        present = {k for k, v in sc.expectations.items() if v == "present"}
        absent = {k for k, v in sc.expectations.items() if v == "absent"}
        found = {k for k, n in r["counts"].items() if n}
        assert r["verdict"] == predicted(sc.expectations), (r, context)
        assert present <= found and not (absent & found), (r["claim"], r["counts"])
