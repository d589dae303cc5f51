"""The clean history and its plants, assembled block by block in a fixed order (the
random draws, and so a seed's history, depend on it)."""

from __future__ import annotations

import json

import numpy as np

from driftlab.checkers.kinds import INVARIANT_VIOLATION, LOST_MESSAGE
from driftlab.harness.history.schema import RunHeader
from driftlab.harness.lab.testing.synthetic.amqp import amqp_queue
from driftlab.harness.lab.testing.synthetic.arrays import (
    cumcount,
    group_cumsum,
    strictly_increasing,
)
from driftlab.harness.lab.testing.synthetic.blocks import Blocks
from driftlab.harness.lab.testing.synthetic.cdc import cdc_pipeline, tail_plants
from driftlab.harness.lab.testing.synthetic.clients import client_ops
from driftlab.harness.lab.testing.synthetic.faults import fault_events, fault_windows
from driftlab.harness.lab.testing.synthetic.final_states import final_states
from driftlab.harness.lab.testing.synthetic.producers import (
    audit_channel,
    mirror_channel,
    outbox_events,
)
from driftlab.harness.lab.testing.synthetic.writes import (
    AMQP,
    AUDIT,
    CDC,
    MS,
    N_PROCESSES,
    T0,
    US,
    Writes,
    pick_keys,
)

EVENTS_PER_WRITE = 12.9  # measured average of the clean history, to size it
WRITE_INTERVAL = 2 * MS  # 500 write attempts a second over 8 processes


def build_history(
    b: Blocks,
    rng: np.random.Generator,
    events: int,
    plant: dict[str, int],
    header: RunHeader,
    cut_short: bool,
) -> dict[str, int]:
    """Add the whole history to `b`, every kind planted `plant[kind]` times; return the
    expected notes (recovered writes)."""
    attempts = max(200, int(events / EVENTS_PER_WRITE))
    n_keys = max(60, attempts // 12, 4 * sum(plant.values()) + 60)
    dt = WRITE_INTERVAL
    start = T0 + 5 * MS
    i = np.arange(attempts, dtype=np.int64)
    invoke = start + i * dt + rng.integers(0, 20 * US, attempts)
    proc = i % N_PROCESSES
    key = rng.integers(0, n_keys, attempts)
    outcome = rng.random(attempts)
    fail = outcome < 0.01
    info = (outcome >= 0.01) & (outcome < 0.015)
    info_committed = info & (rng.random(attempts) < 0.5)
    committed = ~(fail | (info & ~info_committed))
    done_t = invoke + rng.integers(50 * US, 300 * US, attempts)

    # Commit order: by completion time, made strict so every order below is total.
    order = np.argsort(done_t, kind="stable")
    done_t[order] = strictly_increasing(done_t[order])
    c = order[committed[order]]
    c_key = key[c]
    version = cumcount(c_key) + 1
    delta = rng.integers(1, 100, len(c))
    n_ver = np.bincount(c_key, minlength=n_keys)
    last = version == n_ver[c_key]
    # Invariant plants: the key's last write withdraws more than the balance.
    inv_keys = pick_keys(rng, n_ver, plant[INVARIANT_VIOLATION], set(), min_versions=2)
    taken = set(inv_keys.tolist())
    inv_rows = np.isin(c_key, inv_keys) & last
    csum = group_cumsum(c_key, delta)
    delta[inv_rows] = -(csum[inv_rows] - delta[inv_rows]) - 1
    total = group_cumsum(c_key, delta)
    w = Writes(
        i=c,
        key=c_key,
        ok_t=done_t[c],
        version=version,
        total=total,
        delta=delta,
        is_ok=~info[c],
        proc=proc[c],
        last=last,
    )

    b.add(
        len(writer_names()),
        np.array(writer_names()),
        type="header",
        time=T0,
        extra=_header_json(header),
    )
    client_ops(b, rng, invoke, done_t, proc, key, fail, info, committed, w, plant, taken)
    windows = fault_windows(start, int(done_t.max()))
    cdc_end = cdc_pipeline(b, rng, w, plant, taken, windows[1])
    amqp_queue(b, rng, w, plant, taken)
    outbox_events(b, w)
    end_work = max(int(done_t.max()), cdc_end) + 5 * MS
    tail = tail_plants(b, rng, w, plant, taken, end_work)
    audit_channel(b, rng, w, plant[LOST_MESSAGE], end_work)
    mirror_channel(b, rng, w, plant)
    fault_events(b, windows)
    t = tail + 2 * MS
    for kind in ("workload-done", "healed"):
        b.add(1, "runner", type="mark", time=t, kind=kind)
        t += MS
    for consumer, channel in (("g1", CDC), ("q1", AMQP), ("g-audit", AUDIT)):
        b.add(
            1,
            "runner",
            type="mark",
            time=t,
            kind="consumer-done",
            consumer=consumer,
            channel=channel,
        )
        t += MS
    b.add(1, "runner", type="mark", time=t, kind="quiesced")
    t = final_states(b, rng, w, plant, taken, t + MS)
    if not cut_short:
        b.add(1, "runner", type="mark", time=t + MS, kind="end")
    return {"recovered-write": int((~w.is_ok).sum())}


def segment_span(events: int) -> int:
    """Nanoseconds of the history holding about `events` events (the workload's rate)."""
    return max(1, int(events / EVENTS_PER_WRITE * WRITE_INTERVAL))


def writer_names() -> list[str]:
    """Every writer of the history, each with one segment (and one header event)."""
    procs = [f"client-{p}" for p in range(N_PROCESSES)]
    return [
        *procs,
        "cdc",
        "g1",
        "amqp",
        "q1",
        "outbox",
        "audit",
        "g-audit",
        "mirror",
        "nemesis",
        "runner",
    ]


def _header_json(header: RunHeader) -> str:
    return json.dumps(
        {
            "run_id": header.run_id,
            "scenario": header.scenario,
            "seed": header.seed,
            "schema": header.schema,
            "params": header.params,
        },
        separators=(",", ":"),
    )
