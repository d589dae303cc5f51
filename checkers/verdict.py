"""A run's verdict from its anomaly counts and its expectations (docs/checkers.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from checkers.anomaly import ALL_KINDS

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
UNEXPECTED = "unexpected anomaly"
NO_EXPECTATIONS = "no expectations"
HELD = "held"
"""How a reader is told `reproduced` when every expectation is `absent`: nothing was
predicted to appear, the guarantee held (`shown_verdict`)."""
PRESENT, ABSENT = "present", "absent"


class ExpectationError(ValueError):
    """config.json's expectations cannot be judged; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The verdict and the kinds behind it (each list sorted)."""

    verdict: str
    forbidden_found: list[str]
    expected_missing: list[str]


def check_expectations(expectations: object) -> dict[str, str]:
    """Validate config.json's `expectations`: a map from known kind to present|absent."""
    if expectations is None:
        return {}
    if not isinstance(expectations, dict):
        raise ExpectationError(
            "config.json: 'expectations' must be an object such as "
            '{"lost-message": "absent", "duplicate-delivery": "present"}'
        )
    unknown = sorted(k for k in expectations if k not in ALL_KINDS)
    if unknown:
        raise ExpectationError(
            f"config.json: unknown anomaly kind(s) in expectations: {', '.join(unknown)}; "
            f"the kinds are {', '.join(ALL_KINDS)}"
        )
    bad = sorted(k for k, v in expectations.items() if v not in (PRESENT, ABSENT))
    if bad:
        raise ExpectationError(
            f"config.json: expectations of {', '.join(bad)} must be 'present' or 'absent'"
        )
    return dict(expectations)


def judge(counts: Mapping[str, int], expectations: Mapping[str, str]) -> Verdict:
    """`unexpected anomaly` if a kind expected absent appears, else `not reproduced` if a
    kind expected present is missing, else `reproduced`; `no expectations` without any."""
    forbidden = sorted(k for k, v in expectations.items() if v == ABSENT and counts.get(k, 0))
    missing = sorted(k for k, v in expectations.items() if v == PRESENT and not counts.get(k, 0))
    if not expectations:
        verdict = NO_EXPECTATIONS
    elif forbidden:
        verdict = UNEXPECTED
    elif missing:
        verdict = NOT_REPRODUCED
    else:
        verdict = REPRODUCED
    return Verdict(verdict, forbidden, missing)


def shown_verdict(verdict: str, expectations: Mapping[str, str]) -> str:
    """The verdict's word for a reader: `held` for a run `reproduced` whose expectations
    are all `absent` (no anomaly predicted, none found); otherwise the verdict itself.
    analysis.json and the exit status keep the verdict."""
    if verdict == REPRODUCED and expectations and all(v == ABSENT for v in expectations.values()):
        return HELD
    return verdict
