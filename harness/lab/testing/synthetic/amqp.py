"""The AMQP queue (`amqp.kv`, consumer `q1`, store `search`) with its reorder-delivery
plants."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from driftlab.checkers.kinds import REORDER_DELIVERY
from driftlab.harness.lab.testing.synthetic.arrays import next_same_key
from driftlab.harness.lab.testing.synthetic.blocks import Blocks, choose, key_str, tag
from driftlab.harness.lab.testing.synthetic.writes import AMQP, MS, US, Writes, pick_rows


def amqp_queue(
    b: Blocks, rng: np.random.Generator, w: Writes, plant: dict[str, int], taken: set[int]
) -> None:
    """Produce, deliver to q1, apply to `search`, ack; reorder-delivery plants swap two
    consecutive versions of a key in delivery (the older one is then skipped)."""
    m = len(w.i)
    produce_t = w.ok_t + 300 * US
    deliver_t = produce_t + 2 * MS
    msg = tag("a", w.i)
    keys = key_str(w.key)
    vals = pa.array(w.total).cast(pa.string())
    common = dict(channel=AMQP, msg_id=msg, key=keys, value=vals, version=w.version)
    b.msg(m, "amqp", "produce", time=produce_t, process="amqp", **common)
    nxt = next_same_key(w.key)
    swap = pick_rows(
        rng, w, plant[REORDER_DELIVERY], taken, lambda r: True, np.flatnonzero(nxt >= 0)
    )
    for r in swap:
        deliver_t[r], deliver_t[nxt[r]] = deliver_t[nxt[r]], deliver_t[r]
    skipped = np.zeros(m, np.int64)
    skipped[swap] = 1
    b.msg(m, "q1", "deliver", time=deliver_t, consumer="q1", process="q1-0", attempt=1, **common)
    b.msg(
        m,
        "q1",
        choose(["apply", "skip"], skipped),
        time=deliver_t + 100 * US,
        consumer="q1",
        process="q1-0",
        store="search",
        **common,
    )
    b.msg(
        m,
        "q1",
        "ack",
        time=deliver_t + 150 * US,
        consumer="q1",
        process="q1-0",
        channel=AMQP,
        msg_id=msg,
    )
