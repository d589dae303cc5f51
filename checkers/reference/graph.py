"""Graph: one key's writes ordered one way by the source and another way by a store.

The plain-Python specification of the `contradictory-order` kind of docs/checkers.md
(the race of DDIA Figure 11-4). Per (store, key), a networkx DiGraph over the key's
`ok` source writes (nodes are their versions) gets an edge between consecutive versions
(the source's order) and between consecutive effects on the store in time order (the
store's order). A cycle means the two orders contradict each other.

The smallest cycle: the forward edges all climb the version order, so every cycle
holds a backward edge of the store (a, b) with b < a, and the shortest cycle through it
is that edge plus a BFS shortest path b -> a (nx.shortest_path). The smallest over the
backward edges, first found in time order on ties, is a smallest cycle of the graph.

That search is one BFS per distinct backward edge: quadratic on a key whose writes form
one huge strongly connected component (a store applying thousands of writes out of
order). It stops at a 2-cycle, the smallest there is, and gives up once
`CYCLE_SEARCH_SECONDS` have passed, like Elle's :cycle-search-timeout: a backward edge
proves a cycle by itself (the source's chain leads from b back up to a), so the anomaly
is still reported, with the smallest cycle of the edges searched and a detail that says
the search timed out. Its identity (docs/checkers.md) does not depend on the search.
"""

from __future__ import annotations

import time as _time
from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise

from driftlab.checkers.anomaly import Anomaly, evidence_json
from driftlab.checkers.kinds import CONTRADICTORY_ORDER
from driftlab.checkers.reference.common import (
    SourceWrites,
    ViewStates,
    is_effect,
    order_key,
    scoped,
    view_of,
    views_of,
)
from driftlab.harness.history.schema import Event

CHECKER = "graph"
CYCLE_SEARCH_SECONDS = 10.0
"""Time bound of one (store, key)'s search for its smallest cycle."""
SHOWN = 8
"""A cycle's detail names at most this many writes."""


def check(events: Sequence[Event], views: frozenset[str] | None = None) -> list[Anomaly]:
    """Every (store, key) whose effect order contradicts the source's version order.

    A store is judged on the keys of its scope (`views`, the header's by default); an
    effect on a view key carries the state ViewStates.carried names (values repeat
    across a view's versions)."""
    if views is None:
        views = views_of(events)
    events = scoped(events, views)
    writes = SourceWrites(events)
    states = ViewStates(events, views)
    chains: dict[str, list[Event]] = defaultdict(list)
    for w in (*writes.by_value.values(), *writes.deletes.values()):
        if view_of(w.key, views) is None:
            chains[w.key].append(w)
    for found in states.states.values():
        for w in found:
            chains[w.key].append(w)
    applied: dict[tuple[str, str], list[tuple[int, Event]]] = defaultdict(list)
    for e in sorted((e for e in events if is_effect(e)), key=order_key):
        w = states.carried(e) if view_of(e.key, views) is not None else writes.of(e)
        if w is not None:
            applied[(e.store, e.key)].append((w.version, e))
    out = []
    for (store, key), sequence in sorted(applied.items()):
        chain = sorted(chains[key], key=lambda w: w.version)
        found = contradiction(store, key, chain, sequence)
        if found is not None:
            out.append(found)
    return out


def contradiction(
    store: str,
    key: str,
    chain: list[Event],
    applied: list[tuple[int, Event]],
    time_limit: float | None = None,
) -> Anomaly | None:
    """The anomaly of one (store, key), or None when the orders agree.

    `chain` holds the key's `ok` source writes in version order, `applied` the store's
    effects of the key in time order, each with the version of the write it carries.
    Its time is the first effect that steps back in version order. The search for the
    smallest cycle ends after `time_limit` seconds (by default CYCLE_SEARCH_SECONDS,
    read at each call; checked between its BFS runs, at least one of which always
    runs); the detail then says so.
    """
    steps: dict[tuple[int, int], tuple[Event, Event]] = {}
    backward: list[tuple[int, int]] = []
    moves: list[tuple[int, int]] = []
    for (a, ea), (b, eb) in pairwise(applied):
        if a == b:
            continue
        moves.append((a, b))
        if (a, b) in steps:
            continue
        steps[(a, b)] = (ea, eb)
        if b < a:
            backward.append((a, b))
    if not backward:
        return None
    # Only a store that stepped back needs the graph, and nearly every (store, key) of a
    # history does not: the keyed pass judges them all, and a Python worker that never
    # meets one never pays for importing networkx either.
    import networkx as nx

    g = nx.DiGraph()
    g.add_edges_from(pairwise(w.version for w in chain))
    g.add_edges_from(moves)
    limit = CYCLE_SEARCH_SECONDS if time_limit is None else time_limit
    deadline = _time.monotonic() + limit
    cycle: list[int] = []
    searched = 0
    for a, b in backward:
        if cycle and (len(cycle) == 2 or _time.monotonic() >= deadline):
            break
        path = nx.shortest_path(g, b, a)
        searched += 1
        if not cycle or len(path) < len(cycle):
            cycle = path
    by_version = {w.version: w for w in chain}
    successor = dict(pairwise(w.version for w in chain))
    behind: dict[int, Event] = {}
    for x, y in pairwise([*cycle, cycle[0]]):
        pair = (by_version[x], by_version[y]) if successor.get(x) == y else steps[(x, y)]
        behind.update((id(e), e) for e in pair)
    shown = [*cycle, cycle[0]]
    if len(shown) > SHOWN:
        # A cycle through a huge component can hold thousands of writes: a line, not a page.
        shown = [*shown[: SHOWN // 2], None, *shown[-(SHOWN // 2) :]]
    names = " -> ".join("..." if v is None else _name(by_version[v]) for v in shown)
    detail = f"{len(cycle)}-cycle {names} over the source's version order and {store}'s order"
    if searched < len(backward) and len(cycle) > 2:
        detail += (
            f"; cycle search timed out after {limit:g} s (Elle's :cycle-search-timeout):"
            f" the smallest cycle through {searched} of the {len(backward)} steps back"
            f" among the key's {g.number_of_nodes()} writes"
        )
    first_back = steps[backward[0]][1]
    evidence = evidence_json(sorted(behind.values(), key=order_key))
    return Anomaly(
        CHECKER, CONTRADICTORY_ORDER, store, key, None, first_back.time, detail, evidence
    )


def _name(w: Event) -> str:
    """A write as a person reads it: its value, or the delete and its version."""
    return repr(w.value) if w.value is not None else f"delete@{w.version}"
