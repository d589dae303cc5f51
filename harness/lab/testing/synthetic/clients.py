"""The clients' operations: source writes, dual writes to `dw` and reads of it, with
the contradictory-order and read-your-writes plants."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from driftlab.checkers.kinds import CONTRADICTORY_ORDER, RYW_VIOLATION
from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.lab.testing.synthetic.arrays import next_same_key, prev_same_key
from driftlab.harness.lab.testing.synthetic.blocks import Blocks, choose, key_str, tag
from driftlab.harness.lab.testing.synthetic.writes import US, Writes, delay_past_next, pick_rows


def client_ops(
    b: Blocks,
    rng: np.random.Generator,
    invoke: np.ndarray,
    done_t: np.ndarray,
    proc: np.ndarray,
    key: np.ndarray,
    fail: np.ndarray,
    info: np.ndarray,
    committed: np.ndarray,
    w: Writes,
    plant: dict[str, int],
    taken: set[int],
) -> None:
    """Source writes, their dual writes to `dw`, reads of `dw` (with ryw plants)."""
    n = len(invoke)
    ids = np.arange(n)
    clients = tag("client-", proc)
    # The value a write carries: the new balance for committed writes; a failed or lost
    # attempt carries a tag no balance can equal.
    totals = np.zeros(n, np.int64)
    totals[w.i] = w.total
    value_arr = pc.if_else(pa.array(committed), pa.array(totals).cast(pa.string()), tag("x", ids))
    ver = np.full(n, -1, np.int64)
    ver[w.i[w.is_ok]] = w.version[w.is_ok]
    ver_arr = pa.array(ver, mask=ver < 0)
    keys = key_str(key)
    op_ids = tag("w", ids)
    b.op(
        n,
        clients,
        "invoke",
        "write",
        time=invoke,
        op_id=op_ids,
        key=keys,
        value=value_arr,
        store=SOURCE_STORE,
    )
    outcome_code = np.where(fail, 1, np.where(info, 2, 0))
    phase = choose(["ok", "fail", "info"], outcome_code)
    b.op(
        n,
        clients,
        phase,
        "write",
        time=done_t,
        op_id=op_ids,
        key=keys,
        value=value_arr,
        version=ver_arr,
        store=SOURCE_STORE,
        error=choose([None, "serialization failure", "timeout"], outcome_code),
    )

    # Dual write of every committed write to `dw`, in commit order; contradictory-order
    # plants let a write's dw effect land after the next version's (Figure 11-4).
    dw_t = w.ok_t + 100 * US
    nxt = next_same_key(w.key)
    co_rows = delay_past_next(rng, w, plant[CONTRADICTORY_ORDER], taken, dw_t, nxt)
    wclients = tag("client-", w.proc)
    m = len(w.i)
    dw = dict(op_id=tag("d", w.i), key=key_str(w.key), value=pa.array(w.total).cast(pa.string()))
    b.op(m, wclients, "invoke", "write", time=w.ok_t + 20 * US, store="dw", **dw)
    b.op(m, wclients, "ok", "write", time=dw_t, store="dw", **dw)

    # Reads of `dw` right after a process's own ok write return that write (or, planted,
    # the key's previous balance: a read-your-writes violation).
    prev = prev_same_key(w.key)
    ryw_ok = (w.version >= 2) & w.is_ok & (prev >= 0)
    ryw_ok &= np.where(prev >= 0, w.is_ok[np.maximum(prev, 0)], False)
    ryw_rows = pick_rows(
        rng, w, plant[RYW_VIOLATION], taken, lambda r: True, np.flatnonzero(ryw_ok)
    )
    reads = w.is_ok & (rng.random(m) < 0.3)
    reads[co_rows] = False
    reads[ryw_rows] = True
    r_idx = np.flatnonzero(reads)
    r_val = w.total[r_idx].copy()
    r_ver = w.version[r_idx].copy()
    planted = np.isin(r_idx, ryw_rows)
    r_val[planted] = w.total[prev[r_idx[planted]]]
    r_ver[planted] -= 1
    rclients = tag("client-", w.proc[r_idx])
    read = dict(op_id=tag("r", w.i[r_idx]), key=key_str(w.key[r_idx]), store="dw")
    k, t = len(r_idx), w.ok_t[r_idx]
    b.op(k, rclients, "invoke", "read", time=t + 110 * US, **read)
    value = pa.array(r_val).cast(pa.string())
    b.op(k, rclients, "ok", "read", time=t + 160 * US, value=value, version=r_ver, **read)
