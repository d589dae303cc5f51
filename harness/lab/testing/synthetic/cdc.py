"""The CDC pipeline (channel `cdc.kv`, consumer `g1`, store `cache`) and the plants on
its consumer: poll-skip, nonmonotonic-poll, lost-write, stale-overwrite and, after the
workload, duplicate-delivery and duplicate-apply."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from driftlab.checkers.kinds import (
    DUPLICATE_APPLY,
    DUPLICATE_DELIVERY,
    LOST_WRITE,
    NONMONOTONIC_POLL,
    POLL_SKIP,
    STALE_OVERWRITE,
)
from driftlab.harness.lab.testing.synthetic.arrays import (
    cumcount,
    next_same_key,
    strictly_increasing_unsorted,
)
from driftlab.harness.lab.testing.synthetic.blocks import Blocks, choose, key_str, tag, take_rows
from driftlab.harness.lab.testing.synthetic.faults import Window
from driftlab.harness.lab.testing.synthetic.writes import (
    CDC,
    MS,
    N_PARTITIONS,
    T0,
    US,
    Writes,
    delay_past_next,
    pick_rows,
)


def cdc_pipeline(
    b: Blocks,
    rng: np.random.Generator,
    w: Writes,
    plant: dict[str, int],
    taken: set[int],
    crash: Window,
) -> int:
    """Produce, deliver to g1, apply to `cache`, periodic commits; CDC-side plants.
    Delivery lags 0.5-20 ms, and whatever `crash` holds back comes after it, in offset
    order per partition. Returns the time of the last event."""
    m = len(w.i)
    part = w.key % N_PARTITIONS
    offset = cumcount(part)
    produce_t = w.ok_t + 200 * US
    due = produce_t + (rng.gamma(2.0, 1.5, m).clip(0.5, 20.0) * MS).astype(np.int64)
    held = (produce_t >= crash.start) & (produce_t < crash.stop)
    due[held] = np.maximum(due[held], crash.stop + 50 * MS)
    # Offset order per partition: one strictly increasing pass over all partitions,
    # each shifted far beyond the run's span.
    by_part = np.lexsort((offset, part))
    shift = part[by_part] * (1 << 50)
    deliver_t = np.empty(m, np.int64)
    deliver_t[by_part] = strictly_increasing_unsorted(due[by_part] - T0 + shift) - shift + T0
    apply_t = deliver_t + 100 * US
    msg = tag("m", w.i)
    keys = key_str(w.key)
    vals = pa.array(w.total).cast(pa.string())
    common = dict(
        channel=CDC,
        partition=part,
        offset=offset,
        msg_id=msg,
        key=keys,
        value=vals,
        version=w.version,
    )
    b.msg(m, "cdc", "produce", time=produce_t, process="cdc", **common)

    # Neighbours in the partition, to plant offset anomalies between clean deliveries.
    by_part = np.lexsort((offset, part))
    nxt_p = np.full(m, -1, np.int64)
    same = part[by_part][1:] == part[by_part][:-1]
    nxt_p[by_part[:-1][same]] = by_part[1:][same]
    prv_p = np.full(m, -1, np.int64)
    prv_p[by_part[1:][same]] = by_part[:-1][same]
    near: set[tuple[int, int]] = set()

    def clear(r: int) -> bool:
        """r has neighbours on both sides and no plant within two offsets."""
        if prv_p[r] < 0 or nxt_p[r] < 0 or deliver_t[nxt_p[r]] - deliver_t[r] < 10 * US:
            return False
        p, o = int(part[r]), int(offset[r])
        return all((p, o + d) not in near for d in range(-2, 3))

    def mark(r: int) -> None:
        near.add((int(part[r]), int(offset[r])))

    skip_rows = pick_rows(rng, w, plant[POLL_SKIP], taken, clear, np.arange(m))
    proc_code = np.zeros(m, np.int64)
    for i, r in enumerate(skip_rows):
        mark(r)
        proc_code[r] = i + 1
    proc_names = ["g1-0", *[f"g1-s{i}" for i in range(len(skip_rows))]]
    repoll = pick_rows(rng, w, plant[NONMONOTONIC_POLL], taken, clear, np.arange(m))
    for r in repoll:
        mark(r)
    b.msg(
        m,
        "g1",
        "deliver",
        time=deliver_t,
        consumer="g1",
        process=choose(proc_names, proc_code),
        attempt=1,
        **common,
    )
    if repoll:
        rp = np.array(repoll)
        again = deliver_t[rp] + (deliver_t[nxt_p[rp]] - deliver_t[rp]) // 3
        sub = {k: take_rows(v, rp) for k, v in common.items()}
        b.msg(len(rp), "g1", "deliver", time=again, consumer="g1", process="g1-0", attempt=2, **sub)
        b.msg(
            len(rp),
            "g1",
            "skip",
            time=again + 1,
            consumer="g1",
            process="g1-0",
            store="cache",
            **sub,
        )

    # Lost writes: delivered, never applied (not the key's last write, so the final
    # state is right). Stale overwrites: an apply delayed past the next version's.
    nxt = next_same_key(w.key)
    has_next = w.is_ok & (nxt >= 0)
    lost = pick_rows(rng, w, plant[LOST_WRITE], taken, lambda r: True, np.flatnonzero(has_next))
    delay_past_next(rng, w, plant[STALE_OVERWRITE], taken, apply_t, nxt)
    applied = np.ones(m, bool)
    applied[lost] = False
    a = np.flatnonzero(applied)
    b.msg(
        len(a),
        "g1",
        "apply",
        time=apply_t[a],
        consumer="g1",
        process=choose(proc_names, proc_code[a]),
        store="cache",
        **{k: take_rows(v, a) for k, v in common.items()},
    )

    # Commits every 50 offsets of a partition, after the delivery.
    cm = np.flatnonzero(offset % 50 == 49)
    b.msg(
        len(cm),
        "g1",
        "commit",
        time=deliver_t[cm] + 150 * US,
        consumer="g1",
        process="g1-0",
        channel=CDC,
        partition=part[cm],
        offset=offset[cm] + 1,
    )
    return int(max(apply_t.max(), deliver_t.max() + 150 * US))


def tail_plants(
    b: Blocks, rng: np.random.Generator, w: Writes, plant: dict[str, int], taken: set[int], t: int
) -> int:
    """After the workload: redeliveries of a key's last write to a restarted consumer
    instance (duplicate-delivery), re-applies of a key's last write (duplicate-apply).
    Returns the time after them."""
    lasts = np.flatnonzero(w.last)
    part = w.key % N_PARTITIONS
    offset = cumcount(part)
    for kind in (DUPLICATE_DELIVERY, DUPLICATE_APPLY):
        rows = pick_rows(rng, w, plant[kind], taken, lambda r: True, lasts)
        for n, r in enumerate(rows):
            ev = dict(
                channel=CDC,
                partition=int(part[r]),
                offset=int(offset[r]),
                msg_id=f"m{w.i[r]}",
                key=f"acct-{w.key[r]}",
                value=str(w.total[r]),
                version=int(w.version[r]),
                consumer="g1",
            )
            if kind == DUPLICATE_DELIVERY:
                proc = f"g1-r{n}"
                b.msg(1, "g1", "deliver", time=t, process=proc, attempt=2, **ev)
                b.msg(1, "g1", "skip", time=t + 10 * US, process=proc, store="cache", **ev)
            else:
                b.msg(1, "g1", "apply", time=t, process="g1-0", store="cache", **ev)
            t += 100 * US
    return t
