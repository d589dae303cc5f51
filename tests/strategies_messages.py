"""Hypothesis strategies for random message histories (lost, duplicates, reorder).

Small alphabets make collisions likely: the same msg_id delivered twice, versions going
backwards, offsets reused, times tied. Fields are sometimes unset, as malformed or
partial histories are. Every event has a writer and a per-writer seq, as recorded
histories do, so time order is total.
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import strategies as st

from driftlab.harness.history.schema import LOG_AUDIT, SOURCE_STORE, Event, Mark, OpPhase

KEYS = ("k0", "k1")
CONSUMERS = ("g0", "g1", LOG_AUDIT)
PROCESSES = ("p0", "p1")
CHANNELS = ("c0", "c1")
DERIVED = ("cache", "search")
MSG_IDS = ("m0", "m1", "m2", "m3", "m4", "m5")
VALUES = tuple(f"v{i}" for i in range(len(MSG_IDS)))
WRITERS = ("w0", "w1", "w2")


def _maybe(values: tuple, null_share: int = 10) -> st.SearchStrategy:
    """One of `values`, or None about once in `null_share` draws."""
    return st.sampled_from((None, *values * (null_share - 1)))


def _mostly(usual: object, values: tuple) -> st.SearchStrategy:
    """`usual` four times in five, else any of `values` or None."""
    return st.sampled_from((usual, usual, usual, usual, usual, usual, usual, None, *values))


_times = st.integers(0, 25)


@st.composite
def msg_events(draw: st.DrawFn) -> Event:
    """A step of one message's life. Message i has its own key, version, value and log
    coordinates, so that events about it usually agree; sometimes a field is unset or
    another message's, as when a broker or a consumer misbehaves."""
    i = draw(st.integers(0, len(MSG_IDS) - 1))
    return Event(
        type="msg",
        time=draw(_times),
        action=draw(st.sampled_from(("produce", "deliver", "deliver", "apply", "skip"))),
        msg_id=draw(_mostly(MSG_IDS[i], MSG_IDS)),
        key=draw(_mostly(KEYS[i % 2], KEYS)),
        version=draw(_mostly(i, tuple(range(len(MSG_IDS))))),
        value=draw(_mostly(VALUES[i], (*VALUES, None))),
        channel=draw(_mostly("c0", CHANNELS)),
        partition=draw(_mostly(i % 2, (0, 1))),
        offset=draw(_mostly(i // 2, tuple(range(4)))),
        consumer=draw(_maybe(CONSUMERS)),
        process=draw(_maybe(PROCESSES)),
        store=draw(_maybe(DERIVED)),
    )


@st.composite
def log_events(draw: st.DrawFn) -> Event:
    """A produce or deliver on one partition's log at any offset, usually of the message
    that offset holds: polls that skip or go back, sends that go back, messages at two
    offsets, and offsets that only a poll shows."""
    offset = draw(st.integers(0, len(MSG_IDS) - 1))
    return Event(
        type="msg",
        time=draw(_times),
        action=draw(st.sampled_from(("produce", "deliver", "deliver"))),
        msg_id=draw(_mostly(MSG_IDS[offset], MSG_IDS)),
        key=KEYS[offset % 2],
        channel="c1",
        partition=0,
        offset=offset,
        consumer=draw(_maybe(CONSUMERS)),
        process=draw(_maybe(PROCESSES)),
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
    version=_maybe(tuple(range(len(MSG_IDS)))),
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

events = st.one_of(msg_events(), msg_events(), msg_events(), log_events(), op_events, mark_events)


@st.composite
def message_histories(draw: st.DrawFn, min_events: int = 0, max_events: int = 30) -> list[Event]:
    """A random history: messages, source and derived writes, done and quiesced marks."""
    out = draw(st.lists(events, min_size=min_events, max_size=max_events))
    seqs: defaultdict[str, int] = defaultdict(int)
    for e in out:
        e.writer = draw(st.sampled_from(WRITERS))
        e.seq = seqs[e.writer]
        seqs[e.writer] += 1
    return out


def _scoped(prefix: str, e: Event) -> Event:
    """`e` with its names moved into a namespace of their own (the source keeps its name:
    it is the one system of record; so does the log audit)."""

    def scope(name: str | None) -> str | None:
        return None if name is None else f"{prefix}{name}"

    e.key, e.process = scope(e.key), scope(e.process)
    if e.consumer != LOG_AUDIT:  # one name: the log audit's, as the source keeps its own
        e.consumer = scope(e.consumer)
    e.channel, e.msg_id, e.writer = scope(e.channel), scope(e.msg_id), scope(e.writer)
    if e.store != SOURCE_STORE:
        e.store = scope(e.store)
    return e


@st.composite
def combined_histories(draw: st.DrawFn, max_parts: int = 12) -> list[Event]:
    """Several random histories, each in its own namespace, as one history: many dense
    small cases for the price of one Spark job (the first part may be empty)."""
    first = draw(message_histories())
    rest = draw(st.lists(message_histories(min_events=10), min_size=2, max_size=max_parts))
    parts = [first, *rest]
    return [_scoped(f"h{i}.", e) for i, part in enumerate(parts) for e in part]
