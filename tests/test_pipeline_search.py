"""The search and shrinking of `driftlab explore pipeline.toml`, with a judge function
in place of real runs (the real runs: tests/test_pipeline_explore.py): its choices
repeat with the seed, it prefers moments and mutations, it shrinks a failure k of n,
stops at its caps, and writes a file `driftlab run` reads back."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from driftlab.harness.app.pipeline_search.found_file import found_text
from driftlab.harness.app.pipeline_search.search import Explorer, Plan
from driftlab.harness.app.pipeline_search.space import (
    Candidate,
    Space,
    draw,
    drop_fault,
    moments,
    mutate,
)
from driftlab.harness.app.pipeline_search.trial import Trial, features
from driftlab.harness.cli import app
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.nemesis.schedule import Anchor, FaultSpec, Schedule
from driftlab.scenarios.pipeline.spec import load, parse

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "catch_up"

SPACE = Space(
    processes=("consumer",),
    links=("consumer->postgres", "consumer->redis"),
    services=("postgres", "redis"),
    mirrors=("cache",),
    duration=8.0,
    recovery=2.0,
    writes=400,
)


def catch_up_bug(cand: Candidate, seed: int, rate: float = 1.0) -> Trial:
    """Fails (with probability `rate`) when a crash of the consumer waits for its
    ready line after a restart, at most 0.5 s, and a crash or restart of it came
    before: the example's bug, as a function. Anchored faults open 1 s in; the cache
    lags as long as the consumer is down."""
    restarted = False
    hit = False
    for f in cand.faults:
        if f.kind in ("crash", "restart") and f.target == "consumer":
            if restarted and f.after == Anchor("ready", "consumer", 2) and f.at <= 0.5:
                hit = True
            restarted = True
    failed = hit and random.Random(seed).random() < rate
    opened = tuple(1.0 if f.after is not None else f.at for f in cand.faults)
    # The cache lags while the consumer is down: something new to a search.
    down = sum(f.duration for f in cand.faults if f.kind == "crash" and f.target == "consumer")
    return Trial(
        failed=failed,
        lag_s={"cache": down},
        kinds={"missing": 3} if failed else {},
        forbidden={"missing": 3} if failed else {},
        opened_at=opened,
        seed=seed,
        wall_s=1.0,
    )


def test_draws_repeat_with_the_seed_and_are_valid_schedules() -> None:
    first = [draw(random.Random(7), SPACE) for _ in range(20)]
    again = [draw(random.Random(7), SPACE) for _ in range(20)]
    assert [c.key() for c in first] == [c.key() for c in again]
    rng = random.Random(3)
    for _ in range(200):
        cand = mutate(rng, draw(rng, SPACE), SPACE)
        assert 1 <= len(cand.faults) <= 3
        Schedule(cand.faults, 2.0).validate()
        for i, f in enumerate(cand.faults):
            if f.after is None:
                assert f.until <= SPACE.duration - SPACE.recovery
            elif f.after.event == "ready" and f.after.nth > 1:
                # A restart's ready line only after as many restarts of it before.
                restarts = [g for g in cand.faults[:i] if g.kind in ("crash", "restart")]
                assert len(restarts) >= f.after.nth - 1 or cand.origin == "mutation"


def test_clock_only_draws_wait_for_no_moment() -> None:
    rng = random.Random(1)
    assert all(f.after is None for _ in range(50) for f in draw(rng, SPACE, clock_only=True).faults)


def test_moments_after_a_crash_include_the_restart() -> None:
    crash = FaultSpec("crash", "consumer", 1.0, 1.0)
    assert Anchor("ready", "consumer", 2) not in dict(moments(SPACE, ()))
    after = dict(moments(SPACE, (crash,)))
    assert Anchor("ready", "consumer", 2) in after
    assert Anchor("fault_end", "0") in after and Anchor("lag", "cache", 1, 0.5) in after


def test_dropping_a_fault_keeps_the_moments_of_the_others() -> None:
    a = FaultSpec("crash", "consumer", 1.0, 1.0)
    b = FaultSpec("cut", "consumer->redis", 0.2, 0.5, after=Anchor("fault_end", "0"))
    c = FaultSpec("pause", "consumer", 0.1, 0.3, after=Anchor("fault_start", "1"))
    # b waited for a's end: it opens when a would have ended, at the clock.
    assert drop_fault((a, b, c), 0) == (
        FaultSpec("cut", "consumer->redis", 2.2, 0.5),
        FaultSpec("pause", "consumer", 0.1, 0.3, after=Anchor("fault_start", "0")),
    )
    # c waited for b's start: now for what b waited for, 0.2 s later.
    (_, c2) = drop_fault((a, b, c), 1)
    assert c2.after == Anchor("fault_end", "0") and c2.at == 0.3


def test_the_search_finds_and_shrinks_a_bug_of_a_moment() -> None:
    ex = Explorer(SPACE, catch_up_bug, Plan(seed=11, runs=80, k=2, n=3)).explore()
    assert ex.exit_code == exitcodes.VERDICT and ex.found is not None
    assert ex.first_failure is not None and ex.first_failure <= ex.runs
    m = ex.minimal
    assert m is not None and len(m.faults) == 2, ex.best()
    assert m.faults[1].after == Anchor("ready", "consumer", 2)
    assert ex.minimal_rate == (3, 3)
    # Shrunk: the shortest workload, the shortest windows.
    assert m.duration < SPACE.duration and all(f.duration <= 0.3 for f in m.faults)
    phases = [s.phase for s in ex.steps]
    assert phases.index("confirm") < phases.index("shrink") < phases.index("final")
    # Repeatable: the same seed makes the same choices.
    again = Explorer(SPACE, catch_up_bug, Plan(seed=11, runs=80, k=2, n=3)).explore()
    assert [s.candidate.key() for s in again.steps] == [s.candidate.key() for s in ex.steps]


def test_plain_random_clock_times_miss_it_and_say_how_many_they_tried() -> None:
    ex = Explorer(SPACE, catch_up_bug, Plan(seed=11, runs=25, guided=False)).explore()
    assert ex.exit_code == exitcodes.OK and ex.found is None
    assert ex.schedules == ex.runs == 25 and ex.stopped == "runs"


def test_a_flaky_failure_is_decided_k_of_n_and_the_shrinking_stops_at_its_cap() -> None:
    def flaky(cand: Candidate, seed: int) -> Trial:
        return catch_up_bug(cand, seed, rate=0.6)

    ex = Explorer(SPACE, flaky, Plan(seed=5, runs=200, shrink_cap=6)).explore()
    assert ex.found is not None and ex.minimal is not None
    fails, tries = ex.minimal_rate
    assert fails >= 2 and tries == 3
    shrink_runs = sum(s.phase == "shrink" for s in ex.steps)
    # The cap is checked before each candidate, which may take up to n runs.
    assert shrink_runs <= 6 + 2
    assert ex.shrink_note == "shrinking stopped at its cap of 6 runs"


def test_a_run_that_shows_something_new_is_kept_as_a_parent() -> None:
    def lagging(cand: Candidate, seed: int) -> Trial:
        lag = sum(f.duration for f in cand.faults)
        return Trial(failed=False, lag_s={"cache": lag}, wall_s=1.0)

    ex = Explorer(SPACE, lagging, Plan(seed=2, runs=20)).explore()
    news = [s for s in ex.steps if s.new]
    assert news and all(name.startswith("lag:cache:") for s in news for name in s.new)
    # Only a longer lag than ever is new: the buckets below it come with it.
    assert features(Trial(failed=False, lag_s={"cache": 0.6})) == {
        f"lag:cache:{b}" for b in range(3)
    }
    assert any(s.candidate.origin == "mutation" for s in ex.steps)
    assert features(Trial(failed=True, kinds={"missing": 1})) == {"fail", "anomaly:missing"}


def test_three_lab_failures_in_a_row_end_the_exploration() -> None:
    def broken(cand: Candidate, seed: int) -> Trial:
        return Trial(failed=False, lab_failed=True, wall_s=1.0, note="postgres down")

    ex = Explorer(SPACE, broken, Plan(seed=1, runs=10)).explore()
    assert ex.runs == 3 and ex.stopped == "lab" and ex.exit_code == exitcodes.LAB_FAILED


def test_the_found_schedule_is_the_users_file_with_its_faults_replaced(tmp_path: Path) -> None:
    text = (EXAMPLE / "pipeline-bug.toml").read_text()
    cand = Candidate(
        (
            FaultSpec("crash", "consumer", 1.5, 0.5),
            FaultSpec("crash", "consumer", 0.2, 0.3, after=Anchor("ready", "consumer", 2)),
            FaultSpec(
                "latency", "consumer->redis", 0.0, 1.0, {"ms": 200}, Anchor("lag", "cache", 1, 0.2)
            ),
        ),
        5.0,
    )
    out = found_text(text, cand, ["found by driftlab explore", "seed 4"])
    assert out.startswith("# found by driftlab explore\n# seed 4\n")
    path = tmp_path / "found.toml"
    path.write_text(out)
    assert (EXAMPLE / "consumer.sh").exists()
    data = tomllib.loads(out)
    assert data["workload"]["duration"] == 5 and data["workload"]["rate"] == 50
    assert data["expect"] == tomllib.loads(text)["expect"]
    # The comments above [expect] stay with it; the file's own faults are gone.
    assert out.count("[[faults]]") == 3
    found = parse(data, EXAMPLE / "found.toml")
    assert found.faults.faults == cand.faults
    assert load(EXAMPLE / "pipeline-bug.toml").faults.faults != cand.faults


def test_no_schedule_kills_a_process_twice_at_once() -> None:
    crash = FaultSpec("crash", "consumer", 0.5, 0.3)
    assert Candidate((crash, FaultSpec("crash", "consumer", 0.7, 1.0)), 8.0).clashes()
    assert not Candidate((crash, FaultSpec("crash", "consumer", 0.9, 1.0)), 8.0).clashes()
    at_its_start = FaultSpec("crash", "consumer", 0.05, 2.0, after=Anchor("fault_start", "0"))
    assert Candidate((crash, at_its_start), 8.0).clashes()
    on_redis = FaultSpec("crash", "redis", 0.05, 2.0, after=Anchor("fault_start", "0"))
    assert not Candidate((crash, on_redis), 8.0).clashes()
    ex = Explorer(SPACE, catch_up_bug, Plan(seed=4, runs=60)).explore()
    assert not any(s.candidate.clashes() for s in ex.steps)


def test_the_shrinking_skips_a_schedule_whose_moment_cannot_come() -> None:
    crash = FaultSpec("crash", "consumer", 1.0, 1.0)
    again = FaultSpec("crash", "consumer", 0.2, 0.3, after=Anchor("ready", "consumer", 2))
    assert not Candidate((crash, again), 8.0).unreachable()
    assert Candidate((again,), 8.0).unreachable()
    ex = Explorer(SPACE, catch_up_bug, Plan(seed=11, runs=80)).explore()
    assert not any(s.candidate.unreachable() for s in ex.steps if s.phase == "shrink")


def test_explore_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["explore", str(tmp_path / "absent.toml"), "--runs", "2"])
    assert missing.exit_code == exitcodes.BAD_INPUT and "cannot be read" in missing.output
    budget = runner.invoke(app, ["explore", str(EXAMPLE / "pipeline.toml"), "--budget", "5x"])
    assert budget.exit_code == exitcodes.BAD_INPUT and "is not a duration" in budget.output


def test_a_clock_time_replaces_a_moment_only_when_it_fails_every_time() -> None:
    crash = FaultSpec("crash", "consumer", 1.0, 0.2)
    again = FaultSpec("crash", "consumer", 0.0, 0.2, after=Anchor("ready", "consumer", 2))

    def two_in_three(cand: Candidate, seed: int) -> Trial:
        """Two 0.2 s crashes of the consumer fail 2 runs in 3 (by seed), whatever
        opens the second; its moment comes 1.5 s in."""
        both = len(cand.faults) == 2 and all(f.duration == 0.2 for f in cand.faults)
        opened = (1.0, 1.5)[: len(cand.faults)]
        return Trial(failed=both and seed % 3 != 0, opened_at=opened, seed=seed, wall_s=1.0)

    start = Candidate((crash, again), 4.0)
    ex = Explorer(SPACE, two_in_three, Plan(seed=1, runs=40), start=start).explore()
    assert ex.found == start and ex.minimal == start, ex.best()
    clocked = [s for s in ex.steps if s.candidate.origin == "clock time 1"]
    assert clocked and any(s.trial.failed for s in clocked)
