"""The runner end to end on the real stack: the run folder, the history, signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from driftlab.harness.app.run import run_scenario
from driftlab.harness.history import exitcodes
from driftlab.harness.history.schema import SCHEMA_VERSION
from driftlab.harness.lab.scenario import Scenario, faults
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.workload.spec import WorkloadSpec

pytestmark = pytest.mark.services


def _events(run_dir: Path) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for seg in sorted((run_dir / "history").glob("*.jsonl")):
        out += [json.loads(line) for line in seg.read_text().splitlines() if line]
    return out


def test_a_run_leaves_a_complete_folder(stack: Stack, tmp_path: Path) -> None:
    sc = Scenario(
        name="runner-smoke",
        setup="dual-write",
        summary="smoke",
        workload=WorkloadSpec(clients=2, keys=3, mix={"write": 3, "read": 1}, rate=80, duration=2),
        faults=faults({"kind": "pause", "target": "redis", "at": 0.3, "duration": 0.4}),
        expectations={"phantom": "absent"},
    )
    runs = tmp_path / "runs"
    result = run_scenario(sc, seed=5, runs_dir=runs, stack=stack, analyze=False)
    assert result.exit_code == exitcodes.OK and result.error is None
    run_dir = result.run_dir.path
    assert run_dir.parent == runs / "runner-smoke"
    assert re.fullmatch(r"\d{8}T\d{6}Z-5", run_dir.name)
    assert (runs / "latest").resolve() == run_dir.resolve()
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["scenario"], config["seed"]) == ("runner-smoke", 5)
    assert config["expectations"] == {"phantom": "absent"}
    assert config["params"]["workload"]["duration"] == 2
    assert (run_dir / "logs" / "runner.log").stat().st_size > 0
    assert (run_dir / "logs" / "redis.log").exists()
    summary = json.loads((run_dir / "logs" / "run.json").read_text())
    assert summary["ops"] == result.stats.ops > 20

    evs = _events(run_dir)
    (header,) = [json.loads(e["extra"]) for e in evs if e["type"] == "header"]
    assert header["params"] == config["params"] and header["schema"] == SCHEMA_VERSION
    marks = [e["kind"] for e in evs if e["type"] == "mark"]
    assert marks == ["workload-start", "workload-done", "healed", "quiesced", "end"]
    faults_seen = [(e["phase"], e["kind"]) for e in evs if e["type"] == "fault"]
    assert faults_seen == [("start", "pause"), ("stop", "pause")]
    stores = {e["store"] for e in evs if e["type"] == "state"}
    assert stores == {"source", "cache", "search"}
    oks = [e for e in evs if e["type"] == "op" and e["phase"] == "ok" and e["f"] == "write"]
    assert all(isinstance(e.get("version"), int) for e in oks if e["store"] == "source")
    # Values are unique across the run: the checkers rely on it.
    values = [
        e["value"]
        for e in evs
        if e["type"] == "op"
        and e["phase"] == "invoke"
        and e["f"] == "write"
        and e["store"] == "source"
    ]
    assert len(values) == len(set(values))


_INTERRUPTED_RUN = """
import sys
from pathlib import Path
from driftlab.harness.app.run import run_scenario
from driftlab.harness.lab.workload.spec import WorkloadSpec
from driftlab.harness.lab.scenario import Scenario, faults
sc = Scenario(
    name="runner-sigterm", setup="dual-write", summary="interrupted",
    workload=WorkloadSpec(clients=2, keys=3, rate=50, duration=120),
    faults=faults({"kind": "pause", "target": "redis", "at": 1.0, "duration": 100}),
)
r = run_scenario(sc, seed=1, runs_dir=Path(sys.argv[1]), analyze=False)
sys.exit(r.exit_code)
"""


def test_sigterm_heals_closes_the_history_and_leaves_no_process(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # cwd in tmp_path: no `driftlab up` stack to reuse, so the run starts its own.
    proc = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED_RUN, str(runs)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    try:
        deadline = time.monotonic() + 120
        run_dir = None
        while time.monotonic() < deadline:
            found = list(runs.glob("runner-sigterm/*/history/*.jsonl"))
            if found and '"start"' in found[0].read_text():  # the pause window is open
                run_dir = found[0].parents[1]
                break
            time.sleep(0.2)
        assert run_dir is not None, "the run did not reach its fault window"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == exitcodes.INTERRUPTED
    finally:
        if proc.poll() is None:
            proc.kill()
    evs = _events(run_dir)
    marks = [e["kind"] for e in evs if e["type"] == "mark"]
    assert "end" not in marks and "healed" in marks
    starts = {e["fault_id"] for e in evs if e["type"] == "fault" and e["phase"] == "start"}
    stops = {e["fault_id"] for e in evs if e["type"] == "fault" and e["phase"] == "stop"}
    assert starts and starts == stops
    log = (run_dir / "logs" / "runner.log").read_text()
    root = re.search(r"stack: its own, in (\S+)", log)
    assert root is not None
    assert not Path(root.group(1)).exists()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            assert root.group(1) not in cmdline, f"left behind: pid {entry.name} {cmdline}"
