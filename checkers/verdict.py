"""A run's verdict: one function (`decide`) from its anomaly counts, each kind's chances,
its expectations and the run's facts (docs/checkers.md, Verdicts).

Every command that judges a run (run, analyze, replay, suite, matrix, the pytest plugin,
an import) gets its verdict from the analysis, which calls `decide` once and writes it
to analysis.json; nothing rewrites it afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.checkers.kinds import BY_NAME

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
UNEXPECTED = "unexpected anomaly"
NO_EXPECTATIONS = "no expectations"
HELD = "held"
"""The guarantee held: every expectation is `absent` and none was found (nothing was
predicted to appear). Written as such to analysis.json and logs/run.json."""
INCONCLUSIVE = "inconclusive"
LAB_FAILED = "lab failed"
PRESENT, ABSENT = "present", "absent"

EXIT_CODES = {
    REPRODUCED: 0,
    HELD: 0,
    NO_EXPECTATIONS: 0,
    NOT_REPRODUCED: 1,
    UNEXPECTED: 1,
    INCONCLUSIVE: 3,
    LAB_FAILED: 3,
}
"""Each verdict's exit status (driftlab.harness.history.exitcodes: 1 the verdict, 3 the lab or a
claim
the run did not test)."""


class ExpectationError(ValueError):
    """config.json's expectations cannot be judged; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The verdict, the kinds behind it (each list sorted), why it is inconclusive, the
    lab failed or the system under test failed outside the counts (`reasons`, one line
    each, empty otherwise), the named kinds the run did not test (`untested`: no
    chance, not found) and what a reader should know that does not change the verdict
    (`caveats`, one line each: an untested kind, a fault window that slipped past its
    plan, a fault that never took effect under a verdict that does not rest on it)."""

    verdict: str
    forbidden_found: list[str]
    expected_missing: list[str]
    reasons: list[str] = field(default_factory=list)
    untested: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """The exit status the verdict means."""
        return EXIT_CODES[self.verdict]


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the verdict needs of a run beyond its counts and chances."""

    lab_failures: Sequence[Mapping[str, Any]] = ()
    """the lab's own failures (logs/run.json `lab_failures`): service, at (s), what"""
    ran: bool = True
    """some client operation completed"""
    faults: Sequence[str] = ()
    """fault windows that never took effect or had no operation, one line each"""
    slipped: Sequence[str] = ()
    """fault windows that lasted well beyond their planned duration, one line each
    (driftlab.checkers.run_facts.SLIP_TOLERANCE)"""
    unreadable: Sequence[str] = ()
    """what could not be read that the counts rest on, one line each: an importer's
    history, a store at the final reading"""
    not_converged: Sequence[str] = ()
    """stores that did not equal the source after the convergence wait, one line each"""
    not_back: Sequence[str] = ()
    """processes of the system under test that did not come back after a fault"""
    min_chances: Mapping[str, int] = field(default_factory=dict)
    """kind -> the chances the scenario requires at least"""
    failed_checkers: Sequence[str] = ()
    """checkers that failed in the analysis: their kinds were not judged"""


def check_expectations(expectations: object) -> dict[str, str]:
    """Validate config.json's `expectations`: a map from known kind to present|absent."""
    return _kind_map(
        expectations,
        "expectations",
        '{"lost-message": "absent", "duplicate-delivery": "present"}',
        lambda v: v in (PRESENT, ABSENT),
        "must be 'present' or 'absent'",
    )


def check_min_chances(minimum: object) -> dict[str, int]:
    """Validate config.json's `min_chances`: a map from known kind to a count >= 1."""
    return _kind_map(
        minimum,
        "min_chances",
        '{"lost-message": 100}',
        lambda v: type(v) is int and v >= 1,
        "must be whole numbers of at least 1",
    )


def _kind_map(
    value: object, name: str, example: str, valid: Callable[[object], bool], rule: str
) -> dict[str, Any]:
    """config.json's `name`, a map from known kind to a value `valid` accepts (`rule`
    says which); `example` shows one."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExpectationError(f"config.json: '{name}' must be an object such as {example}")
    unknown = sorted(k for k in value if k not in ALL_KINDS)
    if unknown:
        raise ExpectationError(
            f"config.json: unknown anomaly kind(s) in {name}: {', '.join(unknown)}; "
            f"the kinds are {', '.join(ALL_KINDS)}"
        )
    bad = sorted(k for k, v in value.items() if not valid(v))
    if bad:
        raise ExpectationError(f"config.json: {name} of {', '.join(bad)} {rule}")
    return dict(value)


def judge(counts: Mapping[str, int], expectations: Mapping[str, str]) -> Verdict:
    """The counts against the expectations alone: `unexpected anomaly` if a kind expected
    absent appears, else `not reproduced` if a kind expected present is missing, else
    `held` if every expectation is `absent`, else `reproduced`; `no expectations`
    without any. `decide` adds what the run tested."""
    forbidden = sorted(k for k, v in expectations.items() if v == ABSENT and counts.get(k, 0))
    missing = sorted(k for k, v in expectations.items() if v == PRESENT and not counts.get(k, 0))
    if not expectations:
        verdict = NO_EXPECTATIONS
    elif forbidden:
        verdict = UNEXPECTED
    elif missing:
        verdict = NOT_REPRODUCED
    elif all(v == ABSENT for v in expectations.values()):
        verdict = HELD
    else:
        verdict = REPRODUCED
    return Verdict(verdict, forbidden, missing)


def decide(
    counts: Mapping[str, int],
    chances: Mapping[str, int],
    expectations: Mapping[str, str],
    facts: RunFacts,
) -> Verdict:
    """The verdict of a run, in this order:

    1. `lab failed` when the lab recorded a failure of its own (a service died, a fault
       could not be injected or healed): nothing the run shows can be blamed on the
       system under test;
    2. `inconclusive` when what the counts rest on could not be read (an imported
       history's final polls without their reads, a store at the final reading);
    3. `unexpected anomaly` when a forbidden kind was found, or the system under test
       failed outside the counts (a store did not converge, a process did not come
       back after a fault: the reasons name them), whatever else is missing;
    4. `inconclusive` when the run did not test its claim: no client operation ran;
       no kind the expectations name had a chance; a kind expected present had no
       chance (and was not found); a kind has fewer chances than `min_chances` asks;
       a checker whose kind is named failed; or the verdict would be `held` or `not
       reproduced`, which rest on the faults, while a fault never took effect or had
       no operation;
    5. otherwise the counts against the expectations (`judge`): a found expected
       anomaly is `reproduced` whatever fault slipped or never came.

    A named kind without a chance that none of these rules makes decisive is listed as
    untested; the verdict stands.
    """
    judged = judge(counts, expectations)
    untested = sorted(k for k in expectations if not counts.get(k) and not chances.get(k, 0))
    if facts.lab_failures:
        return Verdict(
            LAB_FAILED,
            judged.forbidden_found,
            judged.expected_missing,
            [_lab_line(f) for f in facts.lab_failures],
        )
    if facts.unreadable:
        # The counts themselves rest on what could not be read (every message a final
        # poll without its reads read would count as lost): no finding stands on them.
        return Verdict(INCONCLUSIVE, [], judged.expected_missing, list(facts.unreadable))
    # The system under test's own failures: evidence, as a forbidden kind found is.
    failures = [*facts.not_back, *(f"not converged: {line}" for line in facts.not_converged)]
    reasons = [] if facts.ran else ["the workload never ran: the history holds no client operation"]
    failed = sorted(k for k in expectations if BY_NAME[k].checker in facts.failed_checkers)
    reasons += [f"{k} was not judged: the {BY_NAME[k].checker} checker failed" for k in failed]
    blind = [k for k in untested if k not in failed]
    if blind and len(blind) + len(failed) == len(expectations):
        decisive = blind
        reasons += [f"nothing the run names was tested: {untested_line(k)}" for k in blind]
    else:
        decisive = [k for k in blind if expectations[k] == PRESENT]
        reasons += [untested_line(k) for k in decisive]
    for kind, least in sorted(facts.min_chances.items()):
        n = int(chances.get(kind, 0))
        if n < least and kind not in decisive:
            reasons.append(f"{kind} had {n:,} chance(s); the scenario requires at least {least:,}")
    # A finding that something did not happen rests on every fault taking effect; a
    # found anomaly is evidence whatever a fault did.
    negative = judged.verdict in (HELD, NOT_REPRODUCED) and not failures
    if negative:
        reasons += list(facts.faults)
    caveats = [untested_line(k) for k in untested if k not in decisive and k not in failed]
    if judged.verdict == HELD and not failures:
        caveats += [f"{line}; the held verdict rests on it" for line in facts.slipped]
    else:
        caveats += list(facts.slipped)
    if not negative:
        caveats += list(facts.faults)
    if judged.verdict == UNEXPECTED or failures:
        return Verdict(
            UNEXPECTED,
            judged.forbidden_found,
            judged.expected_missing,
            failures,
            untested,
            caveats,
        )
    if reasons:
        return Verdict(INCONCLUSIVE, [], judged.expected_missing, reasons, untested, caveats)
    return replace(judged, untested=untested, caveats=caveats)


def untested_line(kind: str) -> str:
    """Why a named kind was not tested: what the history lacked for its chance."""
    return f"{kind} had no chance in this history: it holds no {BY_NAME[kind].chance_item}"


def _lab_line(failure: Mapping[str, Any]) -> str:
    at = failure.get("at")
    when = f" at {float(at):.1f} s" if isinstance(at, int | float) else ""
    return f"the lab failed: {failure.get('service', '?')}{when}: {failure.get('what', '?')}"


def shown_verdict(verdict: str, expectations: Mapping[str, str]) -> str:
    """The verdict's word for a reader: `held` for a run recorded `reproduced` before
    `held` was a verdict of its own (every expectation `absent`); otherwise the
    verdict itself, as analysis.json holds it."""
    if verdict == REPRODUCED and expectations and all(v == ABSENT for v in expectations.values()):
        return HELD
    return verdict
