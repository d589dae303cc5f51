"""SIGTERM, and SIGINT also when the command inherited it ignored (a background job of a
script), in every phase of `driftlab run`: exit 130, one line naming the phase, and a
run folder whose logs/run.json says it was interrupted and where (an analysis once
died of SIGTERM in 0.2 s with no line and `exit_code: 0`, and ignored SIGINT)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_support import DRIFTLAB, await_while_running

from driftlab.harness.history import exitcodes
from driftlab.harness.lab.services.stack_home import ENV as STACK_DIR_ENV

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

CONSUMER = """
[processes.consumer]
command = ["sleep", "300"]
env = { HALTED_RUN = "{run_dir}" }
"""
SLOW_TO_START = """
[processes.consumer]
command = ["bash", "-c", "echo waiting; sleep 300; echo ready"]
ready = { log = "^ready$" }
timeout = 300
env = { HALTED_RUN = "{run_dir}" }
"""


def _pipeline(process: str, duration: int, converge: int) -> str:
    """An idle consumer's pipeline: its store never converges."""
    return f"""name = "halted"
services = ["postgres", "redis"]
{process}
[stores.cache]
redis = {{ pattern = "{{namespace}}:cache:*" }}

[workload]
clients = 1
keys = 3
rate = 20
duration = {duration}

[converge]
timeout = {converge}
window = 1
"""


def _marked(run: Path, mark: str) -> bool:
    """Whether the run's history holds the mark `mark` yet."""
    return any(f'"kind":"{mark}"' in p.read_text() for p in (run / "history").glob("*.jsonl"))


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _summary(run: Path) -> dict[str, object] | None:
    try:
        return json.loads((run / "logs" / "run.json").read_text())
    except (OSError, ValueError):
        return None


# Each phase: the pipeline that holds the run there, and how to see it is there.
Seen = Callable[[Path], bool]
PHASES: dict[str, tuple[str, Seen]] = {
    # Its process is started and never gets ready.
    "setup": (
        _pipeline(SLOW_TO_START, 30, 5),
        lambda run: "waiting" in _text(run / "logs" / "consumer.log"),
    ),
    "workload": (_pipeline(CONSUMER, 300, 5), lambda run: _marked(run, "workload-start")),
    "convergence wait": (
        _pipeline(CONSUMER, 2, 300),
        lambda run: _marked(run, "healed"),
    ),
    # logs/run.json without an exit code: written just before the analysis.
    "analysis": (
        _pipeline(CONSUMER, 2, 2),
        lambda run: (s := _summary(run)) is not None and s["exit_code"] is None,
    ),
    # logs/run.json with its exit code and no report yet.
    "report": (
        _pipeline(CONSUMER, 2, 2),
        lambda run: (
            (s := _summary(run)) is not None
            and s["exit_code"] is not None
            and not (run / "report.html").exists()
        ),
    ),
}


@pytest.fixture(scope="module")
def lab() -> Iterator[Path]:
    """A `driftlab up` stack with a warm Spark (the analysis that SIGTERM used to kill
    outright), in /tmp: PostgreSQL's unprivileged account must enter every parent."""
    home = Path(tempfile.mkdtemp(prefix="driftlab-halted-", dir="/tmp"))
    home.chmod(0o755)
    root = home / "stack"
    up = subprocess.run(
        [DRIFTLAB, "up", "--dir", str(root), "--only", "postgres,redis,analysis"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield root
    finally:
        subprocess.run([DRIFTLAB, "down", "--dir", str(root)], capture_output=True, timeout=300)
        shutil.rmtree(home, ignore_errors=True)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("phase", list(PHASES))
@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT ignored by the parent"]
)
def test_a_signal_in_each_phase_ends_the_run_as_interrupted(
    lab: Path, tmp_path: Path, phase: str, sig: signal.Signals
) -> None:
    text, seen = PHASES[phase]
    (tmp_path / "halted.toml").write_text(text)
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [DRIFTLAB, "run", "halted.toml", "--runs-dir", str(runs)],
        cwd=tmp_path,
        env={**os.environ, STACK_DIR_ENV: str(lab), "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint if sig == signal.SIGINT else None,
    )
    try:
        deadline = time.monotonic() + 600
        run = None
        while True:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"the run never reached its {phase}"
            found = list(runs.glob("halted/*/config.json"))
            run = found[0].parent if found else None
            if run is not None and seen(run):
                # Held still, the run cannot leave the phase before the signal.
                proc.send_signal(signal.SIGSTOP)
                if seen(run):
                    break
                proc.send_signal(signal.SIGCONT)
            time.sleep(0.02)
        proc.send_signal(sig)
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == exitcodes.INTERRUPTED, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: interrupted during the {phase}; ")
    assert "Traceback" not in out + err
    summary = _summary(run)
    assert summary is not None
    assert summary["interrupted"] is True and summary["interrupted_in"] == phase
    assert summary["exit_code"] == exitcodes.INTERRUPTED
    # Nothing of the run is left running: its process (and what that forked) stopped.
    assert not [p for p in Path("/proc").glob("[0-9]*/environ") if _started_by(p, run)]


def _started_by(environ: Path, run: Path) -> bool:
    """Whether the process of `environ` was started for the run in `run` (its consumer
    and what that forked have HALTED_RUN)."""
    try:
        return f"HALTED_RUN={run}\0" in environ.read_bytes().decode(errors="replace")
    except OSError:
        return False


USER_TESTS = """
def test_the_pipeline(run_scenario):
    run_scenario("halted.toml")


def test_after():
    open("after-ran", "w").close()
"""


@pytest.mark.timeout(900)
def test_ctrl_c_during_a_run_stops_the_whole_pytest_session(lab: Path, tmp_path: Path) -> None:
    # The run's own handler hears the signal (to heal its faults and keep its history);
    # it once swallowed it, so that only the current test failed and pytest went on.
    (tmp_path / "halted.toml").write_text(PHASES["workload"][0])
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--driftlab-stack-dir",
            str(lab),
            "--driftlab-runs-dir",
            str(runs),
            "test_user.py",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        await_while_running(
            proc,
            lambda: any(_marked(run, "workload-start") for run in runs.glob("halted/*")),
            "workload",
        )
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "was interrupted during the workload; its history is kept there" in out
    assert not (tmp_path / "after-ran").exists(), out
    (run,) = [c.parent for c in runs.glob("halted/*/config.json")]
    summary = _summary(run)
    assert summary is not None and summary["interrupted_in"] == "workload", summary
