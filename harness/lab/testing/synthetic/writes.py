"""The committed source writes every pipeline follows, the history's constants, and
how plants choose their keys and rows (one key per plant, so plants do not interact)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z, so runs are reproducible
MS = 1_000_000
US = 1_000

STORES = ("cache", "search", "dw", "projection:balance")
CDC, AMQP, AUDIT, MIRROR, EVENTS = "cdc.kv", "amqp.kv", "audit", "mirror", "events:account"
N_PROCESSES = 8
N_PARTITIONS = 8


@dataclass
class Writes:
    """Committed source writes in commit order (the arrays the pipelines follow)."""

    i: np.ndarray  # write id
    key: np.ndarray
    ok_t: np.ndarray
    version: np.ndarray
    total: np.ndarray
    delta: np.ndarray
    is_ok: np.ndarray  # False: an `info` write that committed anyway
    proc: np.ndarray
    last: np.ndarray  # the key's last version


def pick_keys(
    rng: np.random.Generator, n_ver: np.ndarray, n: int, taken: set[int], min_versions: int
) -> np.ndarray:
    """`n` distinct keys not yet used by a plant with at least `min_versions` versions."""
    if n == 0:
        return np.empty(0, np.int64)
    cands = [k for k in rng.permutation(np.flatnonzero(n_ver >= min_versions)) if k not in taken]
    if len(cands) < n:
        raise ValueError(f"history too small to plant {n} anomalies; raise `events`")
    picked = np.array(cands[:n], np.int64)
    taken.update(picked.tolist())
    return picked


def pick_rows(
    rng: np.random.Generator,
    w: Writes,
    n: int,
    taken: set[int],
    ok: Callable[[int], bool],
    candidates: np.ndarray,
) -> list[int]:
    """`n` rows (commit ranks) from `candidates`, one per key not yet used, meeting `ok`."""
    rows: list[int] = []
    if n == 0:
        return rows
    for r in rng.permutation(candidates):
        k = int(w.key[r])
        if k in taken or not ok(int(r)):
            continue
        taken.add(k)
        rows.append(int(r))
        if len(rows) == n:
            return rows
    raise ValueError(f"history too small to plant {n} anomalies; raise `events`")


def ok3(w: Writes, nxt: np.ndarray, r: int) -> bool:
    """Row r and the key's next two writes ended `ok`, so their versions are known at
    the source (an `info` write has none, and no order can be judged on it)."""
    return bool(w.is_ok[r] and w.is_ok[nxt[r]] and w.is_ok[nxt[nxt[r]]])


def delay_past_next(
    rng: np.random.Generator,
    w: Writes,
    n: int,
    taken: set[int],
    t: np.ndarray,
    nxt: np.ndarray,
) -> list[int]:
    """Plant `n` effects out of order: each picked write's time in `t` moves between the
    times of its key's next two writes (all three ended `ok`, and those two are far
    enough apart to fit it). `nxt` is `next_same_key(w.key)`; returns the rows."""
    has2 = (nxt >= 0) & (np.where(nxt >= 0, nxt[np.maximum(nxt, 0)], -1) >= 0)
    rows = pick_rows(
        rng,
        w,
        n,
        taken,
        lambda r: t[nxt[nxt[r]]] - t[nxt[r]] > 10 * US and ok3(w, nxt, r),
        np.flatnonzero(has2),
    )
    for r in rows:
        t[r] = (t[nxt[r]] + t[nxt[nxt[r]]]) // 2
    return rows
