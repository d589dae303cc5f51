"""The claims catalogue: every scenario of every architecture of the registry.

Each architecture package defines its scenarios (scenarios/architectures/<arch>/scenarios.py)
and its registry entry carries them; this module only gathers, orders and looks them up.
"""

from __future__ import annotations

import re
from functools import cache

from driftlab.harness.lab.scenario import Scenario
from driftlab.scenarios.catalogue.architectures import ARCHITECTURES


@cache
def all_scenarios() -> dict[str, Scenario]:
    """Every registered scenario by name, in claim order then name."""
    found: dict[str, Scenario] = {}
    for sc in (sc for arch in ARCHITECTURES for sc in arch.scenarios):
        if sc.name in found:
            raise ValueError(f"scenario name {sc.name!r} is registered twice")
        found[sc.name] = sc
    return dict(sorted(found.items(), key=lambda kv: (_claim_order(kv[1].claim), kv[0])))


def _claim_order(claim: str | None) -> tuple[int, str]:
    # "C15-counter" (a second variant of a claim) sorts right after "C15".
    number = re.match(r"C(\d+)", claim or "")
    if number:
        return int(number.group(1)), claim or ""
    return 10_000, claim or ""


def get_scenario(name_or_claim: str) -> Scenario:
    """A scenario by name or by claim id (`C1`); a clear error lists what exists."""
    registry = all_scenarios()
    if name_or_claim in registry:
        return registry[name_or_claim]
    by_claim = [s for s in registry.values() if (s.claim or "").upper() == name_or_claim.upper()]
    if by_claim:
        return by_claim[0]
    raise KeyError(
        f"no scenario {name_or_claim!r}; run `driftlab suite --list` to see them "
        f"({', '.join(registry)})"
    )


def claims_scenarios(only: list[str] | None = None) -> list[Scenario]:
    """The scenarios that test a claim (the first per claim id), optionally only some."""
    seen: dict[str, Scenario] = {}
    for sc in all_scenarios().values():
        # Upper case as keys: a variant id such as "C15-counter" is matched like "C1".
        if sc.claim and sc.claim.upper() not in seen:
            seen[sc.claim.upper()] = sc
    if only is None:
        return list(seen.values())
    wanted = [c.strip().upper() for c in only if c.strip()]
    unknown = [c for c in wanted if c not in seen]
    if unknown:
        raise KeyError(
            f"no scenario for claim(s) {', '.join(unknown)}; registered: {', '.join(seen)}"
        )
    return [seen[c] for c in wanted]
