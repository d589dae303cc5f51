"""One partition's work in the keyed pass: every check of every group it holds.

The history is cut into groups that the checks of docs/checkers.md judge on their own,
given the history-wide Facts:

- KEY (a key): lost-write, recovered-write, stale-overwrite, reorder-delivery,
  divergence, ryw-violation, the lag, event sourcing and contradictory order;
- PARTITION (a channel and partition): nonmonotonic-poll, poll-skip, nonmonotonic-send,
  inconsistent-offset, the realtime lag;
- MESSAGE (a msg_id): lost-message, unseen-message, duplicate-delivery, duplicate-apply,
  duplicate-offset.

An event goes to every group that judges it (`routes`); each group's events, in the
history's order, go through the plain-Python reference checkers, so that the pass and
the reference agree by construction, evidence included, and the property tests check
the cut. Per group only its rows come out: anomalies, the notes' counts, lag samples and
its worst realtime lag.

Assumed of a history (the recorder guarantees it): an operation's invocation and its
completion carry the same key.
"""

from __future__ import annotations

import json
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc

from driftlab.checkers.anomaly import ANOMALY_COLUMNS, Anomaly, sample_rank
from driftlab.checkers.keyed.columns import (
    GROUP_COLUMN,
    KEY,
    MESSAGE,
    PARTITION,
    POSITION_COLUMN,
    REALTIME_SERIES,
    ROUTE_COLUMN,
    SERIES_ROW,
)
from driftlab.checkers.keyed.facts import Facts
from driftlab.checkers.keyed.routes import by_route
from driftlab.checkers.keyed.sieve import Narrowed, sieve
from driftlab.checkers.reference import (
    divergence,
    duplicates,
    eventsourcing,
    graph,
    lost,
    reorder,
    staleness,
)
from driftlab.checkers.reference.common import WRITE_FS, order_key
from driftlab.checkers.reference.eventsourcing import is_log_event
from driftlab.checkers.reference.reorder import RealtimeLag
from driftlab.harness.history.schema import COLUMNS, Event, EventType, MsgAction, OpPhase

ANOMALY, NOTE, LAG, ERROR, EXAMPLE, WHERE, CHANCE = "a", "n", "l", "e", "x", "w", "v"
UNKNOWN_PLACE = "unknown"
OUTPUT_DDL = (
    "out string, checker string, kind string, store string, key string, consumer string, "
    "time bigint, detail string, evidence string, n bigint"
)
"""A row of the pass: an anomaly (ANOMALY), a note's count in `n` (NOTE), a lag sample
(LAG: store, the write's ok time, the lag in ns in `n`), a checker's failure (ERROR:
checker and the error in `detail`), or an anomaly again as a candidate example
(EXAMPLE: a partition's first `per_kind` of each kind by sample_rank), or how many
lost rows of a kind (`kind`) say where the message was (WHERE: `checker` holds
driftlab.checkers.reference.lost.where_lost's answer or UNKNOWN_PLACE, `n` the count), or a
channel partition's worst realtime lag as a row of the REALTIME_SERIES series
(SERIES_ROW, the lag's JSON in `detail`), or a kind's chances (CHANCE: `kind`, the
count in `n`)."""

_KEY_ACTIONS = frozenset({MsgAction.DELIVER, MsgAction.APPLY, MsgAction.SKIP})
_POLL_ACTIONS = frozenset({MsgAction.PRODUCE, MsgAction.DELIVER})
_MESSAGE_ACTIONS = frozenset({MsgAction.PRODUCE, MsgAction.DELIVER, MsgAction.APPLY})


def partition_group(channel: str, partition: int | None) -> str:
    """The PARTITION group of a channel's partition (null partitions are one group)."""
    return f"{channel}\x00{'' if partition is None else partition}"


def judged_by_key(e: Event) -> bool:
    """Whether a key's checks look at `e`, an event with a key: its states, its
    operations but the invocations of writes, and of its messages the deliveries,
    applies, skips and event-log appends. No key check reads a send to any other
    channel or a write's invocation (a third of a key's events in the benchmark's
    histories)."""
    if e.type == EventType.STATE:
        return True
    if e.type == EventType.OP:
        return not (e.phase == OpPhase.INVOKE and e.f in WRITE_FS)
    return e.type == EventType.MSG and (e.action in _KEY_ACTIONS or is_log_event(e))


def routes(e: Event) -> list[tuple[int, str]]:
    """The groups (route, group) that judge `e`; the Spark pass routes alike."""
    out: list[tuple[int, str]] = []
    if e.key is not None and judged_by_key(e):
        out.append((KEY, e.key))
    if e.type == EventType.MSG:
        if e.action in _POLL_ACTIONS and e.channel is not None:
            out.append((PARTITION, partition_group(e.channel, e.partition)))
        if e.action in _MESSAGE_ACTIONS and e.msg_id is not None:
            out.append((MESSAGE, e.msg_id))
    return out


@dataclass
class Judged:
    """What the groups of one partition gave."""

    anomalies: list[Anomaly] = field(default_factory=list)
    notes: Counter[str] = field(default_factory=Counter)
    lags: list[tuple[str, int, int]] = field(default_factory=list)
    realtime: list[RealtimeLag] = field(default_factory=list)
    """each channel partition's worst realtime lag"""
    errors: dict[str, str] = field(default_factory=dict)
    chances: Counter[str] = field(default_factory=Counter)
    """each kind's chances (driftlab.checkers.coverage)"""


Check = Callable[[Sequence[Event], Facts, Judged], None]


def _anomalies_of(check: Callable[[Sequence[Event]], list[Anomaly]]) -> Check:
    """A reference check that needs the group's events alone and gives anomalies only."""

    def run(events: Sequence[Event], facts: Facts, out: Judged) -> None:
        out.anomalies += check(events)

    return run


def _keyed(check: Callable[[Sequence[Event], frozenset[str]], list[Anomaly]]) -> Check:
    """A reference check of key groups that needs the history's view stores."""

    def run(events: Sequence[Event], facts: Facts, out: Judged) -> None:
        out.anomalies += check(events, facts.views)

    return run


def _lost_writes(events: Sequence[Event], facts: Facts, out: Judged) -> None:
    found = lost.writes(events, facts.writes, facts.views)
    out.anomalies += found.lost
    out.notes["recovered-write"] += found.recovered


def _divergence(events: Sequence[Event], facts: Facts, out: Judged) -> None:
    out.anomalies += divergence.check(events, facts.state_stores, facts.views, facts.t0_ns)


def _staleness(events: Sequence[Event], facts: Facts, out: Judged) -> None:
    out.anomalies += staleness.check(events, facts.views)
    out.lags += staleness.lag_rows(events, facts.views)


def _eventsourcing(events: Sequence[Event], facts: Facts, out: Judged) -> None:
    if facts.limits_error is not None:
        raise ValueError(facts.limits_error)
    out.anomalies += eventsourcing.check_keys(events, facts.state_stores, facts.limits)


def _polls(events: Sequence[Event], facts: Facts, out: Judged) -> None:
    out.anomalies += reorder.partition_checks(events)
    out.realtime += reorder.worst_realtime_lags(events)


def _messages(events: Sequence[Event], facts: Facts, out: Judged) -> None:
    found = lost.messages(events, facts.consumers)
    out.anomalies += found.lost
    out.notes["unseen-message"] += found.unseen


CHECKS: dict[int, tuple[tuple[str, Check], ...]] = {
    KEY: (
        ("lost", _lost_writes),
        ("reorder", _keyed(reorder.key_checks)),
        ("divergence", _divergence),
        ("staleness", _staleness),
        ("eventsourcing", _eventsourcing),
        ("graph", _keyed(graph.check)),
    ),
    PARTITION: (("reorder", _polls),),
    MESSAGE: (("lost", _messages), ("duplicates", _anomalies_of(duplicates.check))),
}
"""Per route, the checks of its groups, each under the checker it reports for."""


def judge_group(route: int, events: Sequence[Event], facts: Facts, out: Judged) -> None:
    """Every check of one group; a failing checker is recorded and the others go on."""
    for checker, check in CHECKS[route]:
        _guarded(checker, out, partial(check, events, facts, out))


def _guarded(checker: str, out: Judged, run: Callable[[], None]) -> None:
    """`run` one of `checker`'s checks, unless the checker failed already; its failure
    is recorded in `out`."""
    if checker in out.errors:
        return
    try:
        run()
    except Exception as e:  # a broken checker must not hide the others' results
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        out.errors[checker] = f"{type(e).__name__}: {first}\n{traceback.format_exc()}"


def judge_narrowed(table: pa.Table, narrowed: Narrowed, out: Judged) -> None:
    """The partition checks on the pairs and offsets the sieve left of the channel
    partitions of `table` (a partition's routed rows of the PARTITION route): each pair
    or offset alone gives what the checks of its whole channel partition give of it."""
    positions = narrowed.positions()
    if not positions:
        return
    rows = table.filter(pc.is_in(table[POSITION_COLUMN], pa.array(sorted(positions), pa.int64())))
    events = dict(zip(rows[POSITION_COLUMN].to_pylist(), table_events(rows), strict=True))

    def check() -> None:
        for prev, pos, above in narrowed.polls:
            e = events[pos]
            known = {(e.channel, e.partition): [] if above is None else [above]}
            out.anomalies += reorder.polls(known, [events[prev], e])
        for prev, pos in narrowed.sends:
            out.anomalies += reorder.sends([events[prev], events[pos]])
        at: dict[str, list[Event]] = {}
        for where, pos in sorted(narrowed.offsets, key=lambda o: o[1]):
            at.setdefault(where, []).append(events[pos])
        for group in at.values():
            out.anomalies += reorder.inconsistent_offsets(sorted(group, key=order_key))

    _guarded("reorder", out, check)


def judge(groups: Iterable[tuple[int, Sequence[Event]]], facts: Facts) -> Judged:
    """Every group's checks (the plain-Python whole of one partition)."""
    out = Judged()
    for route, events in groups:
        judge_group(route, events, facts, out)
    return out


def group_history(events: Sequence[Event]) -> list[tuple[int, list[Event]]]:
    """Every group of an in-memory history, each in the history's order."""
    groups: dict[tuple[int, str], list[Event]] = {}
    for e in events:
        for r in routes(e):
            groups.setdefault(r, []).append(e)
    return [(route, evs) for (route, _), evs in groups.items()]


def arrow_groups(table: pa.Table) -> Iterator[tuple[int, list[Event]]]:
    """The groups of a partition's rows (history columns plus route, group and
    position), each group's events in the history's order."""
    if table.num_rows == 0:
        return
    order = pc.sort_indices(
        table,
        [(ROUTE_COLUMN, "ascending"), (GROUP_COLUMN, "ascending"), (POSITION_COLUMN, "ascending")],
    )
    table = table.take(order)
    events = table_events(table)
    route = table.column(ROUTE_COLUMN).to_pylist()
    group = table.column(GROUP_COLUMN).to_pylist()
    start = 0
    for i in range(1, len(events) + 1):
        if i == len(events) or route[i] != route[start] or group[i] != group[start]:
            yield route[start], events[start:i]
            start = i


def table_events(table: pa.Table) -> list[Event]:
    """The events of `table`'s rows."""
    # Dictionary-coded columns (as the pass reads them) decode first: a dictionary
    # array's to_pylist is some twenty times slower than a plain one's.
    columns = [_plain(table.column(c)).to_pylist() for c in COLUMNS]
    return [Event(*values) for values in zip(*columns, strict=True)]


def _plain(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """`column` with dictionary coding removed."""
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    return column


def output_batch(judged: Judged, per_kind: int) -> pa.RecordBatch:
    """The rows of OUTPUT_DDL for what a partition's groups gave."""
    rows: dict[str, list] = {c: [] for c in ("out", *ANOMALY_COLUMNS, "n")}

    def add(out: str, n: int | None = None, **values: object) -> None:
        rows["out"].append(out)
        rows["n"].append(n)
        for c in ANOMALY_COLUMNS:
            rows[c].append(values.get(c))

    by_kind: dict[str, list[Anomaly]] = {}
    for a in judged.anomalies:
        add(ANOMALY, **{c: getattr(a, c) for c in ANOMALY_COLUMNS})
        by_kind.setdefault(a.kind, []).append(a)
    for found in by_kind.values():
        for a in sorted(found, key=sample_rank)[:per_kind]:
            add(EXAMPLE, **{c: getattr(a, c) for c in ANOMALY_COLUMNS})
    for note, count in judged.notes.items():
        add(NOTE, count, kind=note)
    for kind, count in judged.chances.items():
        add(CHANCE, count, kind=kind)
    places = Counter(
        (a.kind, lost.where_lost(a.detail or "") or UNKNOWN_PLACE)
        for a in judged.anomalies
        if a.checker == "lost"
    )
    for (kind, place), count in places.items():
        add(WHERE, count, checker=place, kind=kind)
    for store, ok, delay in judged.lags:
        add(LAG, delay, store=store, time=ok)
    for lag in judged.realtime:
        add(SERIES_ROW, kind=REALTIME_SERIES, detail=json.dumps(lag.to_dict()))
    for checker, error in judged.errors.items():
        add(ERROR, checker=checker, detail=error)
    return pa.RecordBatch.from_pydict(rows, schema=output_schema())


def output_schema() -> pa.Schema:
    """The Arrow schema of OUTPUT_DDL."""
    return pa.schema(
        [
            pa.field(c, pa.int64() if c in ("time", "n") else pa.string())
            for c in ("out", *ANOMALY_COLUMNS, "n")
        ]
    )


def lag_rows(lags: pa.Table) -> pa.Table:
    """LAG rows of OUTPUT_DDL for (store, time, n) lag samples."""
    schema = output_schema()
    columns = {f.name: pa.nulls(lags.num_rows, f.type) for f in schema}
    columns["out"] = pa.array([LAG] * lags.num_rows, pa.string())
    for c in ("store", "time", "n"):
        columns[c] = lags.column(c).combine_chunks().cast(schema.field(c).type)
    return pa.table(columns, schema=schema)


def suspect_rows(routes: dict[int, pa.Table], suspects: pa.Table) -> pa.Table:
    """The rows of a partition's routed rows (`routes`, by route) that belong to a group
    of `suspects` (route, group)."""
    found = [routes[KEY].slice(0, 0)]
    for route in (KEY, MESSAGE):
        groups = suspects.filter(pc.equal(suspects[ROUTE_COLUMN], route))[GROUP_COLUMN]
        if len(groups):
            rows = routes[route]
            found.append(rows.filter(pc.is_in(rows[GROUP_COLUMN], groups)))
    return pa.concat_tables(found)


def partition_step(
    facts: Facts, per_kind: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function mapInArrow runs on each partition of the routed history; it offers
    `per_kind` examples of each kind it found. The sieve (driftlab.checkers.keyed.sieve) clears
    the clean groups; the reference judges the rest, and of the channel partitions only
    their suspect pairs and offsets."""

    def step(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        chunks = list(batches)
        if not chunks:
            return
        routes = by_route(pa.Table.from_batches(chunks))
        sieved = sieve(routes, facts)
        judged = judge(arrow_groups(suspect_rows(routes, sieved.suspects)), facts)
        judge_narrowed(routes[PARTITION], sieved.narrowed, judged)
        judged.notes["unseen-message"] += sieved.unseen
        judged.realtime += sieved.realtime
        judged.notes["recovered-write"] += sieved.recovered
        judged.chances += sieved.chances
        yield output_batch(judged, per_kind)
        if sieved.lags.num_rows:
            yield from lag_rows(sieved.lags).to_batches()

    return step
