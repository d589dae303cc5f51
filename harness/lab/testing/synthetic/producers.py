"""Channels judged by what their producers write: the outbox's events, the `audit`
channel (lost-message plants) and the produce-only `mirror` (offset and send-order
plants)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from driftlab.checkers.kinds import DUPLICATE_OFFSET, INCONSISTENT_OFFSET, NONMONOTONIC_SEND
from driftlab.harness.lab.testing.synthetic.arrays import cumcount
from driftlab.harness.lab.testing.synthetic.blocks import Blocks, key_str, tag
from driftlab.harness.lab.testing.synthetic.writes import AUDIT, EVENTS, MIRROR, MS, US, Writes


def outbox_events(b: Blocks, w: Writes) -> None:
    """Every committed change as an event of its account: the delta, its sequence."""
    m = len(w.i)
    b.msg(
        m,
        "outbox",
        "produce",
        time=w.ok_t + 250 * US,
        process="outbox",
        channel=EVENTS,
        partition=0,
        offset=np.arange(m),
        msg_id=tag("e", w.i),
        key=key_str(w.key),
        value=pa.array(w.delta).cast(pa.string()),
        version=w.version,
    )


def audit_channel(b: Blocks, rng: np.random.Generator, w: Writes, lost: int, end: int) -> None:
    """One audit message per 20 changes on partitions 0-1, all delivered to g-audit;
    lost-message plants sit alone on partitions g-audit was never assigned."""
    sel = np.flatnonzero(np.arange(len(w.i)) % 20 == 0)
    part = np.arange(len(sel)) % 2
    off = cumcount(part)
    t = w.ok_t[sel] + 400 * US
    common = dict(
        channel=AUDIT, partition=part, offset=off, msg_id=tag("au", sel), key=key_str(w.key[sel])
    )
    b.msg(len(sel), "audit", "produce", time=t, process="audit", **common)
    b.msg(
        len(sel),
        "g-audit",
        "deliver",
        time=t + 500 * US,
        consumer="g-audit",
        process="g-audit-0",
        attempt=1,
        **common,
    )
    n = np.arange(lost)
    b.msg(
        lost,
        "audit",
        "produce",
        time=end - 4 * MS + n * US,
        process="audit",
        channel=AUDIT,
        partition=2 + n,
        offset=0,
        msg_id=tag("lost", n),
        key=key_str(rng.integers(0, 10, lost)),
    )


def mirror_channel(b: Blocks, rng: np.random.Generator, w: Writes, plant: dict[str, int]) -> None:
    """A produce-only mirror of one change in 50 on partition 0. inconsistent-offset
    plants: a second producer writes another message at an offset already held (an
    unclean leader election). duplicate-offset plants: a message written again after
    the mirror's last one (a retry without idempotence). nonmonotonic-send plants: a
    producer of its own on partition 1 whose second acknowledged offset is below its
    first."""
    sel = np.flatnonzero(np.arange(len(w.i)) % 50 == 0)
    t = w.ok_t[sel] + 500 * US
    b.msg(
        len(sel),
        "mirror",
        "produce",
        time=t,
        process="mirror",
        channel=MIRROR,
        partition=0,
        offset=np.arange(len(sel)),
        msg_id=tag("mi", sel),
    )
    conflicts, dups = plant[INCONSISTENT_OFFSET], plant[DUPLICATE_OFFSET]
    if max(conflicts, dups) > len(sel):
        raise ValueError(
            f"history too small to plant {conflicts} inconsistent and {dups} duplicate offsets"
        )
    at = np.sort(rng.choice(len(sel), conflicts, replace=False))
    b.msg(
        conflicts,
        "mirror",
        "produce",
        time=t[at] + 1,
        process="mirror-b",
        channel=MIRROR,
        partition=0,
        offset=at,
        msg_id=tag("mx", at),
    )
    again = np.sort(rng.choice(len(sel), dups, replace=False))
    n = np.arange(dups)
    b.msg(
        dups,
        "mirror",
        "produce",
        time=t[-1] + (n + 1) * US,
        process="mirror",
        channel=MIRROR,
        partition=0,
        offset=len(sel) + n,
        msg_id=tag("mi", sel[again]),
    )
    sends = plant[NONMONOTONIC_SEND]
    n = np.arange(sends)
    for step, offset in ((0, 2 * n + 1), (1, 2 * n)):  # offset 2n + 1 acknowledged, then 2n
        b.msg(
            sends,
            "mirror",
            "produce",
            time=t[0] + (2 * n + step) * US,
            process=tag("mirror-r", n),
            channel=MIRROR,
            partition=1,
            offset=offset,
            msg_id=tag(f"mr{step}-", n),
        )
