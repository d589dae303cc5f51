"""The examples/ folder: a user's own setup and scenario, defined outside the package,
run by the real runner on the real stack and judged like a built-in one."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from reference_counts import predicted, reference_counts

from driftlab.checkers.verdict import judge
from driftlab.harness.app.run import run_scenario
from driftlab.harness.lab.services.stack import Stack
from driftlab.scenarios.architectures.dual_write.setup import DualWrite
from driftlab.scenarios.catalogue.architectures import SETUPS, register_setup

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cache_aside"


def _load_example() -> ModuleType:
    """examples/cache_aside/scenario.py, imported the way the script imports itself."""
    spec = importlib.util.spec_from_file_location("cache_aside_scenario", EXAMPLE / "scenario.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.services
@pytest.mark.slow
def test_the_cache_aside_example_reproduces_its_race(stack: Stack, tmp_path: Path) -> None:
    example = _load_example()
    assert SETUPS["cache-aside"].__module__ == "cache_aside"
    sc = example.SCENARIO.with_overrides(duration=4)
    result = run_scenario(sc, seed=1, runs_dir=tmp_path / "runs", stack=stack, analyze=False)
    assert result.error is None and result.quiesced
    assert (tmp_path / "runs" / "cache-aside-race" / result.run_dir.path.name).is_dir()
    counts = reference_counts(result.run_dir)
    verdict = judge(counts, sc.expectations)
    assert verdict.verdict == predicted(sc.expectations), (verdict, counts, str(result.run_dir))


def test_the_example_script_runs_outside_the_package(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE / "scenario.py"), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "--seed" in out.stdout and "--duration" in out.stdout


def test_a_taken_setup_name_is_refused() -> None:
    class Impostor(DualWrite):
        name = DualWrite.name

    with pytest.raises(
        ValueError,
        match=r"is taken by driftlab\.scenarios\.architectures\.dual_write\.setup\.DualWrite",
    ):
        register_setup(Impostor)
    assert SETUPS[DualWrite.name] is DualWrite
