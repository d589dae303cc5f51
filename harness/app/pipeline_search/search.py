"""The search: candidates run one by one until one fails, then shrunk.

Random draws first (after the file's own schedule); then, half of the time, a mutation
of a schedule whose run showed something no run had shown before (an anomaly kind, a
failure, two targets hurt at once, a store lagging twice as long as ever; a run the lab
failed in is no parent), and a fresh draw otherwise. A run is
seconds long, so the loop is a hand-rolled seeded one (random.Random(seed)), not
Hypothesis's hundreds of examples.

A real run is not deterministic: a schedule counts as failing when it fails in `k`
of at most `n` runs (deciding as soon as either way is sure). The first failure is
confirmed so; the shrinking then tries smaller schedules (driftlab.harness.app.pipeline_search.
shrink), each decided k of n (a clock time in place of a moment: n of n), keeps the
first that fails and starts over from it, never tries a schedule twice and stops at its
cap of runs. The minimal schedule is finally run until it has `n` runs, so that its
rate ("fails 3 of 3") is over n.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from driftlab.harness.app.pipeline_search.shrink import smaller
from driftlab.harness.app.pipeline_search.space import Candidate, Space, draw, mutate
from driftlab.harness.app.pipeline_search.trial import RunCandidate, Trial, features
from driftlab.harness.history import exitcodes

LAB_STREAK = 3  # lab failures in a row that end the exploration


@dataclass(frozen=True)
class Plan:
    """How to search: the seed of every choice, the budget (wall seconds and/or runs),
    k of n, the shrinking's cap of runs, and whether the search is guided (moments and
    mutations) or plain (random clock times only: the comparison)."""

    seed: int
    budget_s: float | None = None
    runs: int | None = None
    k: int = 2
    n: int = 3
    shrink_cap: int = 20
    random_first: int = 3
    guided: bool = True

    def validate(self) -> None:
        """Raise ValueError naming the bad field and the fix."""
        if self.budget_s is None and self.runs is None:
            raise ValueError("give a budget: --budget 10m or --runs 30")
        if not 1 <= self.k <= self.n:
            raise ValueError(
                f"a schedule fails k = {self.k} of n = {self.n} runs: need 1 <= k <= n"
            )


@dataclass(frozen=True)
class Step:
    """One run of the exploration: why (`phase`: search, confirm, shrink, final), which
    schedule, what it showed, and which of that was new."""

    index: int
    phase: str
    candidate: Candidate
    trial: Trial
    new: tuple[str, ...] = ()


@dataclass
class Exploration:
    """What an exploration ran and found."""

    plan: Plan
    steps: list[Step] = field(default_factory=list)
    found: Candidate | None = None  # the first schedule that failed
    first_failure: int | None = None  # runs up to and including the first failing one
    found_rate: tuple[int, int] = (0, 0)  # its failures, of how many runs
    minimal: Candidate | None = None  # the smallest that still fails k of n
    minimal_rate: tuple[int, int] = (0, 0)
    minimal_trial: Trial | None = None  # a failing run of it
    minimal_at: int | None = None  # runs up to the one that made it the minimal
    shrink_note: str = ""  # how the shrinking ended when not by running out of steps
    stopped: str = ""  # why the search ended: found, budget, runs, lab
    schedules: int = 0  # distinct schedules the search tried
    wall_s: float = 0.0

    @property
    def runs(self) -> int:
        """Every run the exploration made."""
        return len(self.steps)

    @property
    def exit_code(self) -> int:
        """1 a schedule broke an expectation, 3 the lab failed before any did, else 0."""
        if self.found is not None:
            return exitcodes.VERDICT
        return exitcodes.LAB_FAILED if self.stopped == "lab" else exitcodes.OK

    def best(self) -> str:
        """The most telling schedule so far, in words."""
        if self.minimal is not None:
            fails, tries = self.minimal_rate
            return f"fails {fails} of {tries}: {self.minimal.describe()}"
        if self.found is not None:
            return f"failed: {self.found.describe()}"
        return "nothing failed yet"


class Explorer:
    """One exploration of `space` with `run` (a real run, or a function in tests)."""

    def __init__(
        self,
        space: Space,
        run: RunCandidate,
        plan: Plan,
        *,
        start: Candidate | None = None,
        on_step: Callable[[Exploration, Step], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        plan.validate()
        self.space, self.run_candidate, self.plan = space, run, plan
        self.start = start if start is not None and start.faults else None
        self.on_step = on_step
        self.clock = clock
        self.rng = random.Random(plan.seed)
        self.ex = Exploration(plan)
        self.seen: set[str] = set()
        self.corpus: list[tuple[Candidate, int]] = []  # (schedule, how much it showed new)
        self.tried: set[str] = set()
        self.t0 = clock()

    def explore(self) -> Exploration:
        """Search, confirm the first failure, shrink it; never raises for a run."""
        if self._search():
            self._shrink()
        self.ex.wall_s = self.clock() - self.t0
        return self.ex

    # The budget ---------------------------------------------------------------

    def _room(self) -> bool:
        """Whether one more run fits the budget: the runs left, and the wall time left
        against the mean run so far."""
        plan = self.plan
        if plan.runs is not None and self.ex.runs >= plan.runs:
            return False
        if plan.budget_s is None:
            return True
        elapsed = self.clock() - self.t0
        walls = [s.trial.wall_s for s in self.ex.steps]
        mean = sum(walls) / len(walls) if walls else 0.0
        return elapsed + mean <= plan.budget_s

    def _out_of(self) -> str:
        return "runs" if self.plan.runs is not None and self.ex.runs >= self.plan.runs else "budget"

    def _run(self, cand: Candidate, phase: str) -> Trial:
        seed = (self.plan.seed * 7919 + self.ex.runs) % 2**31
        started = self.clock()
        trial = self.run_candidate(cand, seed)
        if not trial.wall_s:
            trial = replace(trial, wall_s=self.clock() - started)
        new = features(trial) - self.seen
        self.seen |= new
        step = Step(self.ex.runs + 1, phase, cand, trial, tuple(sorted(new)))
        self.ex.steps.append(step)
        if self.on_step is not None:
            self.on_step(self.ex, step)
        return trial

    # The search -----------------------------------------------------------------

    def _search(self) -> bool:
        """Run candidates until one fails k of n (True), or the budget ends."""
        lab_streak = 0
        while self._room():
            cand = self._next()
            self.tried.add(cand.key())
            self.ex.schedules += 1
            trial = self._run(cand, "search")
            lab_streak = lab_streak + 1 if trial.lab_failed else 0
            if lab_streak >= LAB_STREAK:
                self.ex.stopped = "lab"
                return False
            new = self.ex.steps[-1].new
            if new and not trial.lab_failed:
                self.corpus.append((cand, len(new)))
            if not trial.failed:
                continue
            if self.ex.first_failure is None:
                self.ex.first_failure = self.ex.runs
            fails, tries, _ = self._decide(cand, "confirm", 1, 1)
            if self.ex.found is None or fails >= self.plan.k:
                self.ex.found, self.ex.found_rate = cand, (fails, tries)
                self.ex.minimal, self.ex.minimal_rate = cand, (fails, tries)
                self.ex.minimal_trial, self.ex.minimal_at = trial, self.ex.runs
            if fails >= self.plan.k:
                self.ex.stopped = "found"
                return True
        self.ex.stopped = "found" if self.ex.found is not None else self._out_of()
        return False

    def _next(self) -> Candidate:
        """The next schedule to try, never one tried before nor one whose faults clash
        (up to 50 draws)."""
        cand = None
        for _ in range(50):
            cand = self._propose()
            if cand.key() not in self.tried and not cand.clashes():
                return cand
        assert cand is not None
        return cand

    def _propose(self) -> Candidate:
        if self.start is not None and self.ex.schedules == 0:
            return self.start
        if not self.plan.guided:
            return draw(self.rng, self.space, clock_only=True)
        if self.ex.schedules < self.plan.random_first or not self.corpus or self.rng.random() < 0.5:
            return draw(self.rng, self.space)
        # Parents that showed more new, and later ones, are chosen more often.
        weights = [new * (1 + i) for i, (_, new) in enumerate(self.corpus)]
        parent = self.rng.choices([c for c, _ in self.corpus], weights=weights)[0]
        return mutate(self.rng, parent, self.space)

    def _decide(
        self, cand: Candidate, phase: str, fails: int = 0, tries: int = 0, k: int | None = None
    ) -> tuple[int, int, Trial | None]:
        """Run `cand` until it has failed k times (the plan's unless given) or can no
        longer (at most n runs in all, `fails` of `tries` already); its failures, runs
        and a failing run."""
        k, n = k or self.plan.k, self.plan.n
        failing = None
        while fails < k and tries - fails <= n - k and self._room():
            trial = self._run(cand, phase)
            tries += 1
            if trial.failed:
                fails += 1
                failing = trial
        return fails, tries, failing

    # The shrinking --------------------------------------------------------------

    def _shrink(self) -> None:
        ex = self.ex
        assert ex.minimal is not None and ex.minimal_trial is not None
        current, failing = ex.minimal, ex.minimal_trial
        rejected: set[str] = {current.key()}
        spent = 0
        progress = True
        while progress:
            progress = False
            for cand in smaller(current, failing, self.space.recovery):
                if cand.key() in rejected or cand.clashes() or cand.unreachable():
                    continue
                if spent >= self.plan.shrink_cap:
                    ex.shrink_note = f"shrinking stopped at its cap of {self.plan.shrink_cap} runs"
                    self._finish(current)
                    return
                if not self._room():
                    ex.shrink_note = f"shrinking stopped at the {self._out_of()}'s end"
                    return
                rejected.add(cand.key())
                before = ex.runs
                # A clock time lands on another moment under another load: it replaces
                # a moment only when it fails every one of n runs.
                k = self.plan.n if cand.origin.startswith("clock time") else self.plan.k
                fails, tries, trial = self._decide(cand, "shrink", k=k)
                spent += ex.runs - before
                if fails >= k and trial is not None:
                    current, failing = cand, trial
                    ex.minimal, ex.minimal_rate = cand, (fails, tries)
                    ex.minimal_trial, ex.minimal_at = trial, ex.runs
                    progress = True
                    break
        self._finish(current)

    def _finish(self, current: Candidate) -> None:
        """Run the minimal schedule up to n runs, for its rate over n."""
        ex = self.ex
        fails, tries = ex.minimal_rate
        while tries < self.plan.n and self._room():
            trial = self._run(current, "final")
            tries += 1
            fails += trial.failed
            if trial.failed:
                ex.minimal_trial = trial
        ex.minimal_rate = (fails, tries)
