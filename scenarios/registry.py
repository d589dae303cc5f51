"""The scenario registry: every `SCENARIOS` list of the modules of this package.

A new catalogue module only has to define `SCENARIOS: list[Scenario]`; it is found by
name, with no central list to edit.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache

import scenarios
from scenarios.model import Scenario

_NOT_CATALOGUES = {"model", "registry"}


@cache
def all_scenarios() -> dict[str, Scenario]:
    """Every registered scenario by name, in claim order then name."""
    found: dict[str, Scenario] = {}
    for mod in pkgutil.iter_modules(scenarios.__path__):
        if mod.name in _NOT_CATALOGUES or mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"scenarios.{mod.name}")
        for sc in getattr(module, "SCENARIOS", ()):
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
