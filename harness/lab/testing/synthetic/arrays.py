"""Vectorized numpy steps over the writes in commit order: strict time sequences,
ranks, running sums and neighbours within a group."""

from __future__ import annotations

import numpy as np


def strictly_increasing(t: np.ndarray) -> np.ndarray:
    """The smallest strictly increasing sequence >= a sorted `t` (breaks ties by 1 ns)."""
    idx = np.arange(len(t), dtype=np.int64)
    return np.maximum.accumulate(t - idx) + idx


def strictly_increasing_unsorted(t: np.ndarray) -> np.ndarray:
    """The smallest strictly increasing sequence >= `t` elementwise (a running max)."""
    return strictly_increasing(np.maximum.accumulate(t))


def cumcount(groups: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements share its group (0-based rank)."""
    order = np.argsort(groups, kind="stable")
    sg = groups[order]
    starts = np.r_[0, np.flatnonzero(sg[1:] != sg[:-1]) + 1]
    rank_sorted = np.arange(len(sg)) - np.repeat(starts, np.diff(np.r_[starts, len(sg)]))
    out = np.empty(len(groups), np.int64)
    out[order] = rank_sorted
    return out


def group_cumsum(groups: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Running sum of `x` within each group, in array order."""
    order = np.argsort(groups, kind="stable")
    sx = np.cumsum(x[order])
    sg = groups[order]
    starts = np.r_[0, np.flatnonzero(sg[1:] != sg[:-1]) + 1]
    base = np.repeat(np.r_[0, sx[starts[1:] - 1]], np.diff(np.r_[starts, len(sg)]))
    out = np.empty(len(x), np.int64)
    out[order] = sx - base
    return out


def next_same_key(keys: np.ndarray) -> np.ndarray:
    """Index of the next row with the same key (rows in commit order), or -1."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    nxt = np.full(len(keys), -1, np.int64)
    same = sk[1:] == sk[:-1]
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def prev_same_key(keys: np.ndarray) -> np.ndarray:
    """Index of the previous row with the same key (rows in commit order), or -1."""
    nxt = next_same_key(keys)
    prev = np.full(len(keys), -1, np.int64)
    has = nxt >= 0
    prev[nxt[has]] = np.flatnonzero(has)
    return prev
