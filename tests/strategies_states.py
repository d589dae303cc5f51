"""Event builders and Hypothesis histories for the state checkers.

The builders keep hand-made histories short; `histories()` draws random histories that
exercise divergence, staleness, event sourcing and graph checks at once: source writes
in every phase, effects on derived stores in any order (phantoms included), final
states, reads with their invocations, event-sourcing events and a header invariant.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, replace

from hypothesis import strategies as st

from driftlab.checkers.anomaly import Anomaly
from driftlab.harness.history.schema import OBSERVER, SOURCE_STORE, Event, RunHeader

_seq = itertools.count()


def _event(**fields: object) -> Event:
    fields.setdefault("writer", "w")
    fields.setdefault("seq", next(_seq))
    return Event(**fields)  # type: ignore[arg-type]


def write(
    time: int,
    key: str,
    value: str | None,
    version: int | None = None,
    *,
    phase: str = "ok",
    process: str = "p1",
    f: str = "write",
    store: str = SOURCE_STORE,
    op_id: str | None = None,
) -> Event:
    """A write completion (or invocation) on a store, the source by default."""
    return _event(
        type="op",
        time=time,
        process=process,
        phase=phase,
        f=f,
        key=key,
        value=value,
        version=version,
        store=store,
        op_id=op_id,
    )


def apply(time: int, store: str, key: str, value: str | None, version: int | None) -> Event:
    """A consumer applying a change to a derived store."""
    return _event(
        type="msg", time=time, action="apply", store=store, key=key, value=value, version=version
    )


def state(time: int, store: str, key: str | None, value: str | None) -> Event:
    """One key of one store's final state."""
    return _event(type="state", time=time, store=store, key=key, value=value)


def read(
    invoked: int,
    done: int,
    process: str,
    store: str,
    key: str,
    value: str | None,
    op_id: str,
    version: int | None = None,
) -> list[Event]:
    """A read's invocation and its `ok` completion (with the version the store keeps)."""
    common = {"type": "op", "process": process, "f": "read", "key": key, "store": store}
    return [
        _event(time=invoked, phase="invoke", op_id=op_id, **common),
        _event(time=done, phase="ok", value=value, version=version, op_id=op_id, **common),
    ]


def produce(time: int, key: str, delta: str, version: int | None, channel: str = "events") -> Event:
    """An event-sourcing event appended to an event log."""
    return _event(
        type="msg",
        time=time,
        action="produce",
        channel=channel,
        key=key,
        value=delta,
        version=version,
        msg_id=f"m{next(_seq)}",
    )


def header(params: dict[str, object]) -> Event:
    """A segment header carrying the run's params."""
    extra = RunHeader(run_id="r", scenario="s", seed=1, params=params)
    return _event(type="header", time=0, extra=json.dumps(asdict(extra)))


def identities(anomalies: Iterable[Anomaly]) -> Counter[tuple]:
    """The multiset reference and Spark must agree on."""
    return Counter(a.identity() for a in anomalies)


def spark_identities(df: object) -> Counter[tuple]:
    """The same multiset from a Spark anomaly DataFrame."""
    return Counter(
        (r.checker, r.kind, r.store, r.key, r.consumer, r.time)
        for r in df.collect()  # type: ignore[attr-defined]
    )


def kinds(anomalies: Iterable[Anomaly]) -> Counter[tuple[str, str | None, str | None]]:
    """(kind, store, key) counts, for exact expectations in hand-made tests."""
    return Counter((a.kind, a.store, a.key) for a in anomalies)


KEYS = ("k0", "k1", "k2")
STORES = ("cache", "search")
CLIENTS = ("p1", "p2")
READERS = (*CLIENTS, OBSERVER)
"""Clients, and driftlab's sampler of a pipeline's stores, whose reads are sightings."""
AGGREGATES = ("a0", "a1")


@st.composite
def histories(draw: st.DrawFn) -> list[Event]:
    """A random history touching every state checker."""
    events: list[Event] = []
    times = st.integers(0, 60)
    writers = st.sampled_from([None, "w1", "w2"])
    seqs = itertools.count()

    def ev(e: Event) -> Event:
        # seq is unique, so (time, writer, seq) orders every event: ties are undefined.
        e = replace(e, writer=draw(writers), seq=next(seqs))
        events.append(e)
        return e

    source_values: dict[str, list[str | None]] = {}
    committed: list[Event] = []
    for key in draw(st.lists(st.sampled_from(KEYS), unique=True)):
        version = 0
        values: list[str | None] = []
        for i in range(draw(st.integers(0, 4))):
            f = draw(st.sampled_from(["write", "write", "increment", "delete"]))
            phase = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail"]))
            value = None if f == "delete" else f"{key}-{i}"
            process = draw(st.sampled_from(CLIENTS))
            t = draw(times)
            same = {"process": process, "f": f, "op_id": f"w{key}{i}"}
            ev(write(t, key, value, phase="invoke", **same))
            if phase == "ok":
                version += draw(st.integers(1, 3))
            done_t = t + draw(st.integers(0, 5))
            done = ev(
                write(done_t, key, value, version if phase == "ok" else None, phase=phase, **same)
            )
            if phase != "fail":
                committed.append(done)
            if phase == "ok":
                values.append(value)
        source_values[key] = values

    stores = draw(st.lists(st.sampled_from(STORES), unique=True))
    for store in stores:
        for w in committed:
            for _ in range(draw(st.integers(0, 2))):
                if draw(st.booleans()):
                    ev(apply(draw(times), store, w.key, w.value, w.version))
                else:
                    ev(write(draw(times), w.key, w.value, process="app", f=w.f, store=store))
        if draw(st.booleans()):
            t = draw(times)
            ev(apply(t, store, draw(st.sampled_from(KEYS)), "ghost", draw(st.integers(0, 5))))

    if draw(st.booleans()):
        for key, values in source_values.items():
            if values and values[-1] is not None and draw(st.integers(0, 4)):
                ev(state(draw(times), SOURCE_STORE, key, values[-1]))
        ev(state(draw(times), SOURCE_STORE, None, None))
    for store in draw(st.lists(st.sampled_from(STORES), unique=True)):
        for key in KEYS:
            candidates = [None, "ghost", *(w.value for w in committed if w.key == key)]
            for _ in range(draw(st.integers(0, 2))):
                ev(state(draw(times), store, key, draw(st.sampled_from(candidates))))
        if draw(st.booleans()):
            ev(state(draw(times), store, None, None))

    for i in range(draw(st.integers(0, 6))):
        key = draw(st.sampled_from(KEYS))
        candidates = [None, "ghost", *(w.value for w in committed if w.key == key)]
        t = draw(times)
        process = draw(st.sampled_from(READERS))
        store = draw(st.sampled_from((SOURCE_STORE, *STORES)))
        value = draw(st.sampled_from(candidates))
        version = draw(st.one_of(st.none(), st.integers(1, 4)))
        done_at = t + draw(st.integers(0, 5))
        invoked, done = read(t, done_at, process, store, key, value, f"r{i}", version)
        if draw(st.integers(0, 5)):
            ev(invoked)
        ev(done)

    invariant = draw(st.sampled_from([None, {"min": 0}, {"max": 3}, {"min": -1, "max": 2}]))
    if invariant is not None or draw(st.booleans()):
        params = {"invariant": invariant} if invariant is not None else {}
        ev(
            _event(
                type="header",
                time=0,
                extra=json.dumps({"run_id": "r", "scenario": "s", "seed": 1, "params": params}),
            )
        )
    folds: dict[str, int] = {}
    for agg in draw(st.lists(st.sampled_from(AGGREGATES), unique=True)):
        for i in range(draw(st.integers(0, 5))):
            delta = draw(st.sampled_from(["1", "2", "-1", "-2", "+3", "x"]))
            t = draw(times)
            channel = draw(st.sampled_from(["events", "events:acct", "other"]))
            event_version = draw(st.one_of(st.none(), st.integers(0, 6)))
            ev(replace(produce(t, agg, delta, event_version, channel), msg_id=f"e{agg}{i}"))
            folds[agg] = folds.get(agg, 0) + (int(delta) if delta != "x" else 0)
    if draw(st.booleans()):
        for agg in AGGREGATES:
            value = draw(st.sampled_from([None, "0", "1", "x", str(folds.get(agg, 0))]))
            ev(state(draw(times), "projection:balance", agg, value))
    return events
