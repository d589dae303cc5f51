"""Every store's final state, with the divergence plants and projection-mismatch.

Missing, extra and stale are planted here by hand; a kind whose row gives a value a
store's final state shows it by (driftlab.checkers.kinds.Kind.planted: phantom, and any
kind added so) is planted from its row, on keys of its own.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from driftlab.checkers.kinds import EXTRA, MISSING, PROJECTION_MISMATCH, STALE, TABLE
from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.lab.testing.synthetic.arrays import prev_same_key
from driftlab.harness.lab.testing.synthetic.blocks import Blocks, key_str
from driftlab.harness.lab.testing.synthetic.writes import MS, STORES, Writes, pick_rows

# Balances are decimal integers, so a planted value that is not one is never committed.
_PLANTED = tuple((k.name, k.planted) for k in TABLE if k.planted is not None)


def final_states(
    b: Blocks, rng: np.random.Generator, w: Writes, plant: dict[str, int], taken: set[int], t: int
) -> int:
    """Every store's final state (each key's last balance), with divergence and
    projection plants; returns the time after them."""
    lasts = np.flatnonzero(w.last)
    keys = w.key[lasts]
    vals = w.total[lasts].astype(str).astype(object)
    b.add(
        len(lasts),
        "runner",
        type="state",
        time=t,
        store=SOURCE_STORE,
        key=key_str(keys),
        value=pa.array(vals, pa.string()),
        version=w.version[lasts],
    )
    pos = {int(k): n for n, k in enumerate(keys)}
    prev = prev_same_key(w.key)
    for store in STORES:
        t += MS
        v = vals.copy()
        keep = np.ones(len(keys), bool)
        extra: list[tuple[str, str]] = []
        if store == "cache":
            for r in pick_rows(rng, w, plant[MISSING], taken, lambda r: True, lasts):
                keep[pos[int(w.key[r])]] = False
            for r in pick_rows(rng, w, plant[STALE], taken, lambda r: prev[r] >= 0, lasts):
                v[pos[int(w.key[r])]] = str(w.total[prev[r]])
            for kind, value in _PLANTED:
                for r in pick_rows(rng, w, plant[kind], taken, lambda r: True, lasts):
                    v[pos[int(w.key[r])]] = value
            extra = [(f"ghost-{n}", str(n)) for n in range(plant[EXTRA])]
        if store == "projection:balance":
            for r in pick_rows(rng, w, plant[PROJECTION_MISMATCH], taken, lambda r: True, lasts):
                v[pos[int(w.key[r])]] = str(int(w.total[r]) + 7)
        k = np.flatnonzero(keep)
        b.add(
            len(k),
            "runner",
            type="state",
            time=t,
            store=store,
            key=key_str(keys[k]),
            value=pa.array(v[k], pa.string()),
        )
        if extra:
            b.add(
                len(extra),
                "runner",
                type="state",
                time=t,
                store=store,
                key=pa.array([e[0] for e in extra]),
                value=pa.array([e[1] for e in extra]),
            )
    return t + MS
