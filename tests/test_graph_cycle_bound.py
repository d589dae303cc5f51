"""The contradictory-order cycle search gives up after its time bound and still reports
the cycle (Elle's :cycle-search-timeout), on a key whose writes form one huge strongly
connected component."""

from __future__ import annotations

import json

import pytest
from strategies_states import apply, write

from driftlab.checkers.reference import graph

N = 20_000


def huge_component() -> list:
    """N writes of one key; the cache applies them as 0, H, 1, H+1, 2, H+2, ... (H =
    N/2): every other effect steps back from the upper half to the lower, so there are
    N/2 - 1 steps back, every write lies on a cycle, and the smallest cycle is as long
    as half the key (no BFS from one step back finds a short one)."""
    half = N // 2
    events = [write(i, "k", f"v{i}", i) for i in range(N)]
    order = [v for i in range(half) for v in (i, half + i)]
    events += [apply(N + t, "cache", "k", f"v{v}", v) for t, v in enumerate(order)]
    return events


def test_search_gives_up_and_still_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no time to search, one BFS runs: the anomaly is there, its identity is that
    of the full search (time: the first step back, H -> 1), and it says it timed out."""
    monkeypatch.setattr(graph, "CYCLE_SEARCH_SECONDS", 0.0)
    (found,) = graph.check(huge_component())
    half = N // 2
    assert (found.kind, found.store, found.key) == ("contradictory-order", "cache", "k")
    assert found.time == N + 2  # the effect of v1 right after v(H)
    assert ":cycle-search-timeout" in found.detail
    assert f"through 1 of the {half - 1} steps back among the key's {N} writes" in found.detail
    # The cycle reported is a real one: v1 up the source's order to v(H), back to v1.
    cycle = found.detail.split(" over ")[0]
    assert cycle == f"{half}-cycle 'v1' -> 'v2' -> 'v3' -> 'v4' -> ... -> " + (
        f"'v{half - 2}' -> 'v{half - 1}' -> 'v{half}' -> 'v1'"
    )
    assert json.loads(found.evidence)


def test_a_short_cycle_ends_the_search_without_a_timeout() -> None:
    """A 2-cycle is the smallest there is: found first, nothing else is searched and the
    detail claims no timeout even with a zero bound."""
    events = [write(i, "k", f"v{i}", i) for i in range(1, 5)]
    events += [
        apply(10, "cache", "k", "v2", 2),
        apply(11, "cache", "k", "v1", 1),  # back from v2 to v1: the 2-cycle
        apply(12, "cache", "k", "v4", 4),
        apply(13, "cache", "k", "v3", 3),  # another 2-cycle, never searched
    ]
    chain = [e for e in events if e.store == "source"]
    applied = [(e.version, e) for e in events if e.store == "cache"]
    found = graph.contradiction("cache", "k", chain, applied, time_limit=0.0)
    assert found is not None and found.time == 11
    assert found.detail == (
        "2-cycle 'v1' -> 'v2' -> 'v1' over the source's version order and cache's order"
    )
