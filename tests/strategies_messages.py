"""Hypothesis strategies for random message histories (lost, duplicates, reorder).

Small alphabets make collisions likely: the same msg_id delivered twice, versions going
backwards, offsets reused, times tied. Fields are sometimes unset, as malformed or
partial histories are. Every event has a writer and a per-writer seq, as recorded
histories do, so time order is total.
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import strategies as st

from harness.history.schema import SOURCE_STORE, Event, Mark, OpPhase

KEYS = ("k0", "k1", "k2")
VALUES = ("v0", "v1", "v2")
CONSUMERS = ("g0", "g1")
PROCESSES = ("p0", "p1")
CHANNELS = ("c0", "c1")
DERIVED = ("cache", "search")
MSG_IDS = ("m0", "m1", "m2", "m3", "m4")
WRITERS = ("w0", "w1", "w2")


def _maybe(values: tuple, null_share: int = 6) -> st.SearchStrategy:
    """One of `values`, or None about once in `null_share` draws."""
    return st.sampled_from((None, *values * (null_share - 1)))


_times = st.integers(0, 25)
_small = st.integers(0, 5)

msg_events = st.builds(
    Event,
    type=st.just("msg"),
    time=_times,
    action=st.sampled_from(("produce", "produce", "deliver", "deliver", "apply", "skip")),
    channel=_maybe(CHANNELS),
    partition=_maybe((0, 1)),
    offset=_maybe(tuple(range(6))),
    msg_id=_maybe(MSG_IDS),
    consumer=_maybe(CONSUMERS),
    process=_maybe(PROCESSES),
    key=_maybe(KEYS),
    value=_maybe(VALUES, 3),
    version=_maybe(tuple(range(5))),
    store=_maybe(DERIVED),
)

op_events = st.builds(
    Event,
    type=st.just("op"),
    time=_times,
    process=st.sampled_from(PROCESSES),
    phase=st.sampled_from([OpPhase.OK, OpPhase.OK, OpPhase.INFO, OpPhase.FAIL]).map(str),
    f=st.sampled_from(["write", "write", "delete", "increment", "read"]),
    key=_maybe(KEYS),
    value=_maybe(VALUES, 3),
    version=_maybe(tuple(range(5))),
    store=st.sampled_from((SOURCE_STORE, SOURCE_STORE, *DERIVED)),
)

mark_events = st.one_of(
    st.builds(
        Event,
        type=st.just("mark"),
        time=_times,
        kind=st.just(str(Mark.CONSUMER_DONE)),
        consumer=_maybe(CONSUMERS),
        channel=_maybe(CHANNELS, 3),
    ),
    st.builds(Event, type=st.just("mark"), time=_times, kind=st.just(str(Mark.QUIESCED))),
)

events = st.one_of(msg_events, msg_events, msg_events, op_events, mark_events)


@st.composite
def message_histories(draw: st.DrawFn, max_events: int = 30) -> list[Event]:
    """A random history: messages, source and derived writes, done and quiesced marks."""
    out = draw(st.lists(events, max_size=max_events))
    seqs: defaultdict[str, int] = defaultdict(int)
    for e in out:
        e.writer = draw(st.sampled_from(WRITERS))
        e.seq = seqs[e.writer]
        seqs[e.writer] += 1
    return out


def _scoped(prefix: str, e: Event) -> Event:
    """`e` with its names moved into a namespace of their own (the source keeps its name:
    it is the one system of record)."""

    def scope(name: str | None) -> str | None:
        return None if name is None else f"{prefix}{name}"

    e.key, e.consumer, e.process = scope(e.key), scope(e.consumer), scope(e.process)
    e.channel, e.msg_id, e.writer = scope(e.channel), scope(e.msg_id), scope(e.writer)
    if e.store != SOURCE_STORE:
        e.store = scope(e.store)
    return e


@st.composite
def combined_histories(draw: st.DrawFn, max_parts: int = 12) -> list[Event]:
    """Several random histories, each in its own namespace, as one history: many dense
    small cases for the price of one Spark job."""
    parts = draw(st.lists(message_histories(), min_size=1, max_size=max_parts))
    return [_scoped(f"h{i}.", e) for i, part in enumerate(parts) for e in part]
