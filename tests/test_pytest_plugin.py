"""The pytest plugin, run the way a user runs it: a test file through pytest in a
subprocess (pytester), the plugin loaded by its `pytest11` entry point."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# A planted bug: the claim that dual writes apply writes to Redis in PostgreSQL's order.
# The lab's own C1 shows they do not: hundreds of stale overwrites in a few seconds (a
# stale final state is rarer in 3 s, so it would make a flaky planted bug).
PLANTED = """
import dataclasses

import pytest

from driftlab.scenarios.catalogue.registry import get_scenario

CLAIMED_SAFE = dataclasses.replace(
    get_scenario("dual-write-race"),
    name="dual-write-claimed-safe",
    claim=None,
    expectations={"stale-overwrite": "absent"},
)


@pytest.mark.scenario(CLAIMED_SAFE, seed=7, duration="3s")
def test_dual_writes_stay_in_sync(scenario_result):
    raise AssertionError("the body ran after a failed scenario")


@pytest.mark.scenario
def test_only_a_label():
    pass
"""


@pytest.mark.services
@pytest.mark.spark
@pytest.mark.scenario
@pytest.mark.slow
# A stack, a run and a Spark analysis; on a loaded two-core machine more than 600 s.
@pytest.mark.timeout(1200)
def test_a_planted_bug_fails_with_anomalies_report_and_reproduction(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_planted=PLANTED)
    result = pytester.runpytest_subprocess("-m", "scenario", "-p", "no:cacheprovider", "-rA")
    out = result.stdout.str()
    result.assert_outcomes(failed=1, passed=1)
    assert "driftlab scenario dual-write-claimed-safe, seed 7: unexpected anomaly" in out, out
    # One example each: where and what, from examples.json.
    assert re.search(r"forbidden anomaly stale-overwrite: \d+; e\.g\. store \S+ key \S+", out), out
    report = re.search(r"report: (\S+/report\.html)", out)
    assert report, out
    assert Path(report.group(1)).is_file() and Path(report.group(1)).is_relative_to(pytester.path)
    assert (
        "reproduce with: pytest 'test_planted.py::test_dual_writes_stay_in_sync' "
        "--driftlab-seed 7 --driftlab-duration 3s"
    ) in out, out
    assert "the body ran" not in out
    runs = list((pytester.path / "runs" / "dual-write-claimed-safe").iterdir())
    assert len(runs) == 1 and (runs[0] / "analysis.json").is_file()


def test_the_docker_backend_refuses_without_an_engine(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An engine address where nothing listens, also on a machine that runs Docker.
    url = f"unix://{pytester.path}/docker.sock"
    monkeypatch.setenv("DOCKER_HOST", url)
    pytester.makepyfile(
        test_docker="""
        def test_needs_stack(driftlab_stack):
            pass
        """
    )
    result = pytester.runpytest_subprocess("--driftlab-backend", "docker", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [f"*no Docker engine at {url}: start Docker*or use --backend local*"]
    )


def test_marker_arguments_are_checked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.scenario("C1", seeds=3)
        def test_typo():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*@pytest.mark.scenario takes seed, duration and analyze*seeds*"])


def test_the_options_and_fixtures_are_offered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(
        [
            "*--driftlab-backend*",
            "*--driftlab-seed*",
            "*--driftlab-duration*",
            "*--driftlab-runs-dir*",
            "*--driftlab-stack-dir*",
        ]
    )
    fixtures = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider")
    fixtures.stdout.fnmatch_lines(
        [
            "*driftlab_stack*",
            "*run_scenario*",
            "*driftlab_scenario*",
            "*scenario_result*",
        ],
        consecutive=False,
    )


def test_a_stack_dir_without_a_stack_is_refused_with_the_fix(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(
        test_on_stack="""
        def test_uses_the_stack(driftlab_stack):
            pass
        """
    )
    empty = tmp_path / "no-stack"
    empty.mkdir()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--driftlab-stack-dir", str(empty)
    )
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        [f"*--driftlab-stack-dir: no stack in {empty}*start one with `driftlab up --dir*"]
    )
