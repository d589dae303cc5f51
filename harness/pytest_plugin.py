"""driftlab's pytest plugin: scenarios as tests (entry point `pytest11`, loaded by itself).

    @pytest.mark.scenario("C3", seed=7, duration=5)
    def test_cdc_survives_a_consumer_crash(scenario_result):
        assert scenario_result.result.stats.ops > 0

A test marked with a scenario runs it on the session's stack before its body; a run
whose verdict is not the scenario's prediction (a forbidden anomaly, a predicted one
missing, a failed run) fails the test with the anomalies, one example each, the report
path and the command that reproduces it. `pytest -m scenario` selects these tests.

Fixtures:
- `driftlab_stack`: one owned stack per pytest session (services start on first use);
- `run_scenario`: `run_scenario("C1" | Scenario | "pipeline.toml", seed=..., duration=...)
  -> Outcome` (a path ending in .toml runs a pipeline file, docs/pipelines.md); a
  pipeline file takes `external={"postgres": pg, "redis": cache}`, services the test
  started (testcontainers' PostgresContainer, RedisContainer, or URLs) instead of the
  file's, each behind a Toxiproxy link of the session's stack, faults included;
- `explore_pipeline`: `explore_pipeline("pipeline.toml", seed=0, budget="5m" or runs=N,
  duration="6s") -> Exploration`, `driftlab explore FILE.toml` on the session's stack
  (its `exit_code`, `minimal` schedule and `minimal_rate`, every run in `steps`); a
  failing schedule is written beside the file as `<file>.found-<seed>.toml`;
- `driftlab_scenario`: builds a Scenario from a user's own Setup class;
- `scenario_result`: the Outcome of the test's `scenario` marker.

An Outcome's `run_dir` is the run folder (a Path); `result.run_dir` is the same folder
as a driftlab.harness.history.rundir.RunDir, which names each of its files (`.analysis`, `.report`,
...).

Options: --driftlab-backend local|docker, --driftlab-seed, --driftlab-duration (they
override the marker's seed and duration), --driftlab-runs-dir (default runs/),
--driftlab-stack-dir DIR (the running stack of `driftlab up --dir DIR`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from driftlab.harness.app.outcome import Outcome
    from driftlab.harness.app.pipeline_search.search import Exploration
    from driftlab.harness.lab.runner.runner import RunResult
    from driftlab.harness.lab.scenario import Scenario
    from driftlab.harness.lab.services.stack_protocol import ServiceStack
    from driftlab.harness.lab.setups.base import Setup

MARKER = "scenario"
RESULT_FIXTURE = "scenario_result"
_OUTCOME_KEY = pytest.StashKey["Outcome"]()

RunScenario = Callable[..., "Outcome"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """The --driftlab-* options."""
    group = parser.getgroup("driftlab", "driftlab scenarios")
    group.addoption(
        "--driftlab-backend",
        default="local",
        choices=("local", "docker"),
        help="Stack backend of the session: local processes (default) or docker/compose.yml.",
    )
    group.addoption(
        "--driftlab-seed",
        type=int,
        default=None,
        help="Seed of every scenario run (overrides the marker's; default: marker's, else 0).",
    )
    group.addoption(
        "--driftlab-duration",
        default=None,
        help="Workload duration of every scenario run, e.g. 5s (overrides the marker's).",
    )
    group.addoption(
        "--driftlab-runs-dir",
        default="runs",
        help="Where run folders go (default: runs/ under the current folder).",
    )
    group.addoption(
        "--driftlab-stack-dir",
        default=None,
        help="Run on the running stack of `driftlab up --dir DIR` (default: a stack of "
        "the session's own).",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (harmless when pyproject.toml declares it too)."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(name_or_scenario, seed=None, duration=None): run a driftlab scenario "
        f"before the test (it receives the outcome as `{RESULT_FIXTURE}`); "
        "without arguments, only a label for `-m scenario`",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked with a scenario gets the `scenario_result` fixture even when its
    signature does not ask for it: the marker alone makes it a scenario run."""
    for item in items:
        marker = item.get_closest_marker(MARKER)
        if marker is None or not marker.args:
            continue
        names = getattr(item, "fixturenames", None)
        if names is not None and RESULT_FIXTURE not in names:
            names.append(RESULT_FIXTURE)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Fail a scenario test in its call phase (FAILED, not ERROR) before its body runs."""
    outcome = item.stash.get(_OUTCOME_KEY, None)
    if outcome is not None and not outcome.passed:
        pytest.fail(outcome.summary(), pytrace=False)


def _duration(text: str | float | None) -> float | None:
    if text is None or isinstance(text, int | float):
        return None if text is None else float(text)
    from driftlab.harness.cli.common import parse_duration

    try:
        return parse_duration(text)
    except Exception as exc:  # typer.BadParameter: make it a usage error of pytest
        raise pytest.UsageError(f"--driftlab-duration: {exc}") from None


@pytest.fixture(scope="session")
def driftlab_stack(pytestconfig: pytest.Config) -> Iterator[ServiceStack]:
    """One owned stack for the whole session, of --driftlab-backend; each run starts
    what its setup needs (services already up are reused). Stopped at the end.
    With --driftlab-stack-dir, the running stack of `driftlab up --dir DIR`, left up."""
    from driftlab.harness.history.exitcodes import BadInput, LabFailure
    from driftlab.harness.lab.runner.stack_use import open_stack, stack_at

    stack_dir = pytestconfig.getoption("driftlab_stack_dir")
    if stack_dir is not None:
        try:
            shared = stack_at(Path(stack_dir))
        except (BadInput, LabFailure) as exc:
            raise pytest.UsageError(f"--driftlab-stack-dir: {exc}") from None
        yield shared
        return
    with open_stack(pytestconfig.getoption("driftlab_backend")) as stack:
        yield stack


@pytest.fixture(scope="session")
def run_scenario(pytestconfig: pytest.Config, driftlab_stack: ServiceStack) -> RunScenario:
    """A callable: `run_scenario("C1" | Scenario, seed=None, duration=None,
    analyze=True) -> Outcome` (verdict, counts, report path, run folder, summary),
    run on the session's stack into --driftlab-runs-dir."""
    from driftlab.harness.app.outcome import outcome_of
    from driftlab.harness.app.run import check_scenario
    from driftlab.harness.app.run import run_scenario as run_once
    from driftlab.scenarios.catalogue.registry import get_scenario

    runs_dir = Path(pytestconfig.getoption("driftlab_runs_dir")).resolve()

    def run(
        scenario: str | Path | Scenario,
        seed: int | None = None,
        duration: str | float | None = None,
        analyze: bool = True,
        external: Mapping[str, object] | None = None,
    ) -> Outcome:
        secs = _duration(duration)
        if isinstance(scenario, Path) or str(scenario).endswith(".toml"):
            return _run_pipeline_file(
                Path(str(scenario)), 0 if seed is None else seed, secs, analyze, external
            )
        assert not isinstance(scenario, Path)
        if external:
            raise pytest.UsageError(
                f"run_scenario({scenario!r}, external=...): external services are for "
                "pipeline files; pass a .toml file's path"
            )
        sc = get_scenario(scenario) if isinstance(scenario, str) else scenario
        sc = sc.with_overrides(duration=secs)
        check_scenario(sc)
        result = run_once(
            sc,
            seed=0 if seed is None else seed,
            runs_dir=runs_dir,
            stack=driftlab_stack,
            analyze=analyze,
        )
        _stop_if_interrupted(result)
        return outcome_of(result, sc, duration=secs)

    def _run_pipeline_file(
        path: Path,
        seed: int,
        secs: float | None,
        analyze: bool,
        external: Mapping[str, object] | None,
    ) -> Outcome:
        from driftlab.harness.app.pipeline import run_pipeline
        from driftlab.scenarios.pipeline.containers import ContainerError, external_urls
        from driftlab.scenarios.pipeline.spec import PipelineError, load

        try:
            pipeline = load(path, external_urls(external or {}))
        except (PipelineError, ContainerError) as exc:
            raise pytest.UsageError(str(exc)) from None
        out = run_pipeline(
            pipeline,
            seed=seed,
            runs_dir=runs_dir,
            stack=driftlab_stack,
            analyze=analyze,
            duration=secs,
        )
        _stop_if_interrupted(out.run)
        rerun = f"driftlab run {path} --seed {seed}"
        if secs is not None:
            rerun += f" --duration {secs:g}s"
        if external:
            # The services were the test's own, gone with it: the test starts them again.
            rerun = f"pytest '{_current_test()}'"
        outcome = outcome_of(out.run, out.scenario, duration=secs)
        return dataclasses.replace(outcome, rerun=rerun)

    return run


@pytest.fixture(scope="session")
def explore_pipeline(
    pytestconfig: pytest.Config, driftlab_stack: ServiceStack
) -> Callable[..., Exploration]:
    """A callable: `explore_pipeline(path, seed=0, budget=None, runs=None,
    duration=None) -> Exploration`, an exploration of the pipeline file at `path` within
    `budget` ("5m") or `runs`, on the session's stack into --driftlab-runs-dir; its log
    and a failing schedule are written as `driftlab explore` writes them."""
    from driftlab.harness.app.pipeline_search.explore_file import (
        explore_file,
        found_path,
        write_outputs,
    )
    from driftlab.harness.app.pipeline_search.search import Plan
    from driftlab.scenarios.pipeline.spec import PipelineError, load

    runs_dir = Path(pytestconfig.getoption("driftlab_runs_dir")).resolve()

    def explore(
        path: str | Path,
        seed: int = 0,
        budget: str | float | None = None,
        runs: int | None = None,
        duration: str | float | None = None,
    ) -> Exploration:
        path = Path(path)
        try:
            pipeline = load(path)
            plan = Plan(seed=seed, budget_s=_duration(budget), runs=runs)
            plan.validate()
        except (PipelineError, ValueError) as exc:
            raise pytest.UsageError(f"explore_pipeline({str(path)!r}): {exc}") from None
        options = {"runs_dir": runs_dir, "stack": driftlab_stack}
        ex = explore_file(pipeline, plan, _duration(duration), options)
        command = f"pytest '{_current_test()}'"
        write_outputs(ex, path, found_path(path, seed), runs_dir, command)
        return ex

    return explore


@pytest.fixture(scope="session")
def driftlab_scenario() -> Callable[..., Scenario]:
    """Build a Scenario from a user's own Setup class: `driftlab_scenario(MySetup,
    name=..., workload=WorkloadSpec(...), expectations={...}, faults=..., ...)`.
    The setup is registered (as `register_setup` does) so the runner finds it."""
    from driftlab.harness.app.run import check_scenario
    from driftlab.harness.lab.scenario import Scenario
    from driftlab.scenarios.catalogue.architectures import register_setup

    def build(
        setup: type[Setup],
        *,
        name: str | None = None,
        summary: str | None = None,
        expectations: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> Scenario:
        if not isinstance(setup, type):
            raise TypeError(
                f"driftlab_scenario takes a Setup class, not {setup!r}; pass the class itself"
            )
        register_setup(setup)
        sc = Scenario(
            name=name or setup.name,
            setup=setup.name,
            summary=summary or (setup.__doc__ or setup.name).strip().splitlines()[0],
            expectations=dict(expectations or {}),
            **fields,
        )
        check_scenario(sc)
        return sc

    return build


@pytest.fixture
def scenario_result(request: pytest.FixtureRequest, run_scenario: RunScenario) -> Outcome:
    """The outcome of the test's `@pytest.mark.scenario(...)` run; the command-line
    --driftlab-seed and --driftlab-duration win over the marker's."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None or not marker.args:
        raise pytest.UsageError(
            f"{request.node.nodeid}: the scenario_result fixture needs "
            '@pytest.mark.scenario("<name or claim>", seed=..., duration=...) on the test'
        )
    unknown = set(marker.kwargs) - {"seed", "duration", "analyze"}
    if unknown:
        raise pytest.UsageError(
            f"{request.node.nodeid}: @pytest.mark.scenario takes seed, duration and analyze, "
            f"not {', '.join(sorted(unknown))}"
        )
    config = request.config
    seed = config.getoption("driftlab_seed")
    duration = config.getoption("driftlab_duration")
    outcome = run_scenario(
        marker.args[0],
        seed=marker.kwargs.get("seed") if seed is None else seed,
        duration=marker.kwargs.get("duration") if duration is None else duration,
        analyze=marker.kwargs.get("analyze", True),
    )
    if outcome.rerun is None and outcome.scenario.name not in _registered():
        rerun = f"pytest '{request.node.nodeid}' --driftlab-seed {outcome.result.seed}"
        if outcome.duration is not None:
            rerun += f" --driftlab-duration {outcome.duration:g}s"
        outcome = dataclasses.replace(outcome, rerun=rerun)
    request.node.stash[_OUTCOME_KEY] = outcome
    return outcome


def _stop_if_interrupted(result: RunResult) -> None:
    """Ctrl-C (or SIGTERM) during a run stops the whole session, as it would any test.

    The run's own handler hears the signal so the run can heal its faults and keep its
    history; without this the test would merely fail and pytest go on to the next one.
    """
    if result.interrupted:
        raise KeyboardInterrupt(
            f"the run in {result.run_dir.path} was interrupted during the "
            f"{result.interrupted_in}; its history is kept there"
        )


def _current_test() -> str:
    """The running test's node id, from the variable pytest sets while it runs."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    return current.rsplit(" (", 1)[0] or "<the test>"


def _registered() -> dict[str, Scenario]:
    from driftlab.scenarios.catalogue.registry import all_scenarios

    return all_scenarios()
