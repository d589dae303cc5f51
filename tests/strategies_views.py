"""Hypothesis histories with transactions and view stores (issue 37's history format):
a header naming the views, `txn` operations, view states (source writes of keys
`S/<entity>` whose values repeat across versions, deletes among them, in every phase),
the observer's samples of the view stores with or without versions, effects, final
states, and plain keys and a plain store beside them, so that the scoping of keys to
stores is drawn too (a sample of a view store on a key of another store, a plain store
on a view key)."""

from __future__ import annotations

import itertools
import json

from hypothesis import strategies as st
from strategies_states import apply, read, state, write

from driftlab.harness.history.schema import OBSERVER, SOURCE_STORE, Event

VIEWS = ("docs", "sum")
PLAIN_STORE = "cache"
ENTITIES = ("o1", "o2")
DOCS = ('{"l":[]}', '{"l":[1]}', '{"l":[1,2]}')
"""Few view values, so that they repeat across versions."""


@st.composite
def view_histories(draw: st.DrawFn) -> list[Event]:
    """A random history of view stores, plain keys and a plain store."""
    events: list[Event] = []
    times = st.integers(0, 60)
    seqs = itertools.count()

    def ev(e: Event) -> Event:
        e.writer, e.seq = draw(st.sampled_from(["w1", "w2"])), next(seqs)
        events.append(e)
        return e

    views = draw(st.sampled_from([list(VIEWS), ["docs"]]))
    params = {"views": views} if draw(st.integers(0, 5)) else {}
    header = {"run_id": "r", "scenario": "s", "seed": 1, "params": params}
    ev(Event(type="header", time=0, extra=json.dumps(header)))

    keys = [f"{v}/{o}" for v in VIEWS for o in ENTITIES] + ["o1"]
    committed: dict[str, list[Event]] = {k: [] for k in keys}
    for i in range(draw(st.integers(0, 8))):
        entity = draw(st.sampled_from(ENTITIES))
        phase = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail"]))
        process = draw(st.sampled_from(["c1", "c2"]))
        t = draw(times)
        done_t = t + draw(st.integers(0, 5))
        txn = {"type": "op", "process": process, "f": "txn", "op_id": f"t{i}", "key": entity}
        extra = json.dumps({"name": "new_order", "statements": []})
        ev(Event(time=t, phase="invoke", store=SOURCE_STORE, extra=extra, **txn))
        for view in VIEWS:
            key = f"{view}/{entity}"
            deleted = draw(st.integers(0, 4)) == 0
            value = None if deleted else draw(st.sampled_from(DOCS))
            f = "delete" if deleted else "write"
            same = {"process": process, "f": f, "op_id": f"t{i}-{view}"}
            step = json.dumps({"step": "view-state", "txn": f"t{i}"})
            invoked = write(t, key, value, phase="invoke", **same)
            invoked.extra = step
            ev(invoked)
            version = len(committed[key]) + 1 if phase == "ok" else None
            done = ev(write(done_t, key, value, version, phase=phase, **same))
            if phase == "ok":
                committed[key].append(done)
        ev(Event(time=done_t, phase=phase, store=SOURCE_STORE, **txn))
    for i in range(draw(st.integers(0, 3))):
        value = f"p{i}"
        ev(write(draw(times), "o1", value, i + 1, op_id=f"p{i}"))
        committed["o1"].append(Event(type="op", key="o1", value=value, version=i + 1))

    for i in range(draw(st.integers(0, 10))):
        key = draw(st.sampled_from(keys))
        store = draw(st.sampled_from([*VIEWS, PLAIN_STORE]))
        values = [w.value for w in committed[key] if w.value is not None]
        value = draw(st.sampled_from([*values, "ghost", '{"l":[2]}']))
        version = draw(st.one_of(st.none(), st.none(), st.integers(1, 4)))
        t = draw(times)
        if draw(st.integers(0, 3)):
            invoked, done = read(t, t + 1, OBSERVER, store, key, value, f"r{i}", version)
            ev(invoked)
            ev(done)
        else:
            ev(apply(t, store, key, value, version))

    if draw(st.booleans()):
        ev(Event(type="mark", time=61, kind="quiesced"))
    if draw(st.booleans()):
        for key in keys:
            last = committed[key][-1] if committed[key] else None
            if last is not None and last.value is not None and draw(st.integers(0, 4)):
                ev(state(draw(times), SOURCE_STORE, key, last.value))
        ev(state(draw(times), SOURCE_STORE, None, None))
    for store in draw(st.lists(st.sampled_from([*VIEWS, PLAIN_STORE]), unique=True)):
        for key in keys:
            values = [w.value for w in committed[key] if w.value is not None]
            for _ in range(draw(st.integers(0, 1))):
                ev(state(draw(times), store, key, draw(st.sampled_from([None, "ghost", *values]))))
        ev(state(draw(times), store, None, None))
    return events
