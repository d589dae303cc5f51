"""Synthetic runs with transactions and view stores (issue 37's history format), with
planted divergences, stale overwrites and torn reads of exactly known counts.

Orders are written by transactions (`f = "txn"` operations: new_order, add_line,
set_status, drop_line, drop_order); each is followed by the state of every view store's
view of its order (a `view-state` step: the order's document, or its total), and the
observer samples each store after a state committed. Values repeat across a view's
versions (a line added, then dropped; an order dropped and made again), and a failed or
unknown transaction leaves states without a version. The same events can be written
without `params.views` (`views=False`): the history a judgement without views reads.

Beside harness/lab/testing/synthetic (its events carry no transactions): this module is
plain Python, a few seconds per million events.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.checkers.kinds import EXTRA, MISSING, PHANTOM, STALE, STALE_OVERWRITE
from driftlab.harness.history.reader import METADATA_KEY, ROW_GROUP_SIZE, HistoryInfo, arrow_schema
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.history.schema import COLUMNS, OBSERVER, SOURCE_STORE, RunHeader

SCENARIO = "synthetic-views"
PLANTABLE = (MISSING, EXTRA, STALE, PHANTOM, STALE_OVERWRITE, "torn")
"""What a view history can be planted with: kinds, and `torn` (the observer reads a
state the view never had, the final state right: a `phantom`)."""
TEMPLATES = {"add_line": 5, "set_status": 3, "drop_line": 1, "drop_order": 1}
"""Transactions on an existing order, by weight (new_order makes one)."""
STATUSES = ("new", "paid", "shipped")
CLIENTS = 4
MS = 1_000_000


@dataclass
class _Order:
    """The source's rows of one order."""

    status: str = "new"
    lines: list[int] = field(default_factory=list)

    def view(self, store: str) -> str:
        """The canonical JSON of the order's view in `store`."""
        if store == "totals":
            return json.dumps(sum(self.lines))
        doc = {"lines": self.lines, "status": self.status}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))


@dataclass
class _Key:
    """What was recorded of one view key: its states (version, value or None, ok time),
    the values of unknown outcome, and the observer's samples (time, value, version)."""

    states: list[tuple[int, str | None, int]] = field(default_factory=list)
    unsure: set[str] = field(default_factory=set)
    samples: list[tuple[int, str, int]] = field(default_factory=list)


@dataclass(frozen=True)
class ViewRun:
    """What generate_views wrote: the run folder, its events and each kind's count a
    correct judgement finds (every kind of ALL_KINDS)."""

    run_dir: Path
    events: int
    expected: dict[str, int]


class _Columns:
    """The history's columns, one event a row."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {c: [] for c in COLUMNS}

    def add(self, **values: object) -> None:
        for c, column in self.cols.items():
            column.append(values.get(c))


def generate_views(
    run_dir: str | os.PathLike[str],
    events: int = 20_000,
    seed: int = 0,
    plant: Mapping[str, int] | None = None,
    *,
    stores: tuple[str, ...] = ("docs", "totals"),
    views: bool = True,
) -> ViewRun:
    """Write a run of about `events` events into `run_dir` (config.json and
    history.parquet) with `plant` (kinds of PLANTABLE -> how many, each on its own
    key of the first store); `views=False` leaves `params.views` out of the header."""
    plant = dict(plant or {})
    unknown = sorted(set(plant) - set(PLANTABLE))
    if unknown or any(not isinstance(n, int) or n < 0 for n in plant.values()):
        raise ValueError(
            f"plant {plant!r}: kinds of {', '.join(PLANTABLE)} to integers >= 0; fix the plant"
        )
    rng = np.random.default_rng(seed)
    per_txn = 2 + 3.6 * len(stores)
    txns = max(int(events / per_txn), 50)
    orders = max(txns // 6, sum(plant.values()) * 2 + 10)
    header = RunHeader(
        run_id=f"{SCENARIO}-{seed}-{events}",
        scenario=SCENARIO,
        seed=seed,
        params={"events": events, "plant": plant, **({"views": list(stores)} if views else {})},
    )
    out = _Columns()
    t0 = 1_767_225_600 * 10**9
    writers = [f"c{i}" for i in range(CLIENTS)] + [OBSERVER, "runner"]
    for w in writers:
        out.add(type="header", time=t0 - 1, writer=w, extra=json.dumps(asdict(header)))
    out.add(type="mark", time=t0, writer="runner", kind="workload-start")
    keys = _transactions(out, rng, txns, orders, stores, t0)
    end = t0 + (txns + 10) * MS
    expected = _finals(out, rng, keys, stores[0], plant, end)
    out.add(type="mark", time=end + 5 * MS, writer="runner", kind="end")
    table = _table(out)
    folder = RunDir(run_dir)
    folder.path.mkdir(parents=True, exist_ok=True)
    folder.logs.mkdir(exist_ok=True)
    folder.drop_history()
    info = HistoryInfo(events=table.num_rows, segments=len(writers), complete=True, header=header)
    schema = arrow_schema().with_metadata({METADATA_KEY: info.to_json()})
    pq.write_table(
        table.replace_schema_metadata(schema.metadata),
        folder.parquet,
        row_group_size=ROW_GROUP_SIZE,
        compression="zstd",
    )
    folder.write_config(
        {"scenario": SCENARIO, "seed": seed, "params": header.params, "expectations": {}}
    )
    return ViewRun(folder.path, table.num_rows, {k: expected.get(k, 0) for k in ALL_KINDS})


def _transactions(
    out: _Columns,
    rng: np.random.Generator,
    txns: int,
    orders: int,
    stores: tuple[str, ...],
    t0: int,
) -> dict[tuple[str, str], _Key]:
    """`txns` transactions 1 ms apart on `orders` orders, their view states and the
    observer's samples; what each view key recorded."""
    live: dict[str, _Order] = {}
    keys: dict[tuple[str, str], _Key] = {}
    names, weights = list(TEMPLATES), np.array(list(TEMPLATES.values()), float)
    picks = rng.integers(0, orders, txns)
    templates = rng.choice(len(names), txns, p=weights / weights.sum())
    phases = rng.choice(3, txns, p=[0.94, 0.03, 0.03])
    # Drawn at once: a draw each costs a microsecond or two, a million of them seconds.
    amounts = iter(rng.integers(1, 50, txns * 4).tolist())
    sampled = (rng.random((txns, len(stores))) < 0.8).tolist()
    delays = rng.integers(1, MS // 3, (txns, len(stores))).tolist()
    for i in range(txns):
        entity = f"o{picks[i]}"
        t = t0 + (i + 1) * MS
        client = f"c{i % CLIENTS}"
        order = live.get(entity)
        name = "new_order" if order is None else names[templates[i]]
        after = _apply(order, name, amounts)
        phase = ("ok", "fail", "info")[phases[i]]
        op_id = f"{client}-t{i}"
        txn = {"type": "op", "process": client, "writer": client, "f": "txn", "key": entity}
        txn_extra = json.dumps({"name": name, "statements": [f"-- {name} {entity}"]})
        out.add(time=t, phase="invoke", op_id=op_id, store=SOURCE_STORE, extra=txn_extra, **txn)
        ok_at = t + MS // 2
        for j, store in enumerate(stores):
            key = f"{store}/{entity}"
            rec = keys.setdefault((store, key), _Key())
            value = None if after is None else after.view(store)
            version = len(rec.states) + 1 if phase == "ok" else None
            f = "write" if value is not None else "delete"
            step = {"op_id": f"{op_id}-{store}", "process": client, "writer": client, "f": f}
            common = {"type": "op", "key": key, "value": value, "store": SOURCE_STORE, **step}
            extra = json.dumps({"step": "view-state", "txn": op_id})
            out.add(time=t + 1, phase="invoke", extra=extra, **common)
            out.add(time=ok_at + 1, phase=phase, version=version, **common)
            if phase == "info" and value is not None:
                rec.unsure.add(value)
            if phase != "ok":
                continue
            rec.states.append((version, value, ok_at + 1))
            if value is not None and sampled[i][j]:
                seen = ok_at + 2 + delays[i][j]
                _sample(out, key, store, value, seen)
                rec.samples.append((seen, value, version))
        out.add(time=ok_at + 2, phase=phase, op_id=op_id, store=SOURCE_STORE, **txn)
        if phase == "ok":
            if after is None:
                live.pop(entity, None)
            else:
                live[entity] = after
    return keys


def _apply(order: _Order | None, name: str, amounts: Iterator[int]) -> _Order | None:
    """The order after the transaction `name` (None: the order does not exist), its
    new lines' amounts drawn from `amounts`."""
    if name == "new_order":
        return _Order(lines=[next(amounts) for _ in range(next(amounts) % 3 + 1)])
    assert order is not None
    after = _Order(order.status, list(order.lines))
    if name == "add_line":
        after.lines.append(next(amounts))
    elif name == "set_status":
        after.status = STATUSES[min(STATUSES.index(order.status) + 1, len(STATUSES) - 1)]
    elif name == "drop_line" and after.lines:
        after.lines.pop()
    elif name == "drop_order":
        return None
    return after


def _sample(out: _Columns, key: str, store: str, value: str, at: int) -> None:
    """The observer's read of `value` in `store` (a document keeps no version)."""
    same = {"type": "op", "process": OBSERVER, "writer": OBSERVER, "f": "read", "key": key}
    out.add(time=at - 1, phase="invoke", op_id=f"obs-{key}-{at}", store=store, **same)
    out.add(time=at, phase="ok", op_id=f"obs-{key}-{at}", store=store, value=value, **same)


def _finals(
    out: _Columns,
    rng: np.random.Generator,
    keys: dict[tuple[str, str], _Key],
    planted: str,
    plant: dict[str, int],
    end: int,
) -> Counter[str]:
    """The quiesced mark and every store's final state, the plants on keys of the
    store `planted`; the counts a correct judgement finds."""
    out.add(type="mark", time=end, writer="runner", kind="quiesced")
    finals: dict[tuple[str, str], str | None] = {}
    for (store, key), rec in keys.items():
        finals[(store, key)] = rec.states[-1][1] if rec.states else None
    found: Counter[str] = Counter()
    order = sorted(k for k in keys if k[0] == planted)
    rng.shuffle(order)
    held = dict(finals)
    for kind, n in plant.items():
        for _ in range(n):
            at = next((k for k in order if k in finals and _fits(kind, keys[k], finals[k])), None)
            if at is None:
                raise ValueError(f"plant {kind}: too few fitting keys; raise `events`")
            order.remove(at)
            rec, final = keys[at], finals[at]
            values = [v for _, v, _ in rec.states if v is not None]
            if kind == MISSING:
                held[at] = None
            elif kind == EXTRA:
                held[at] = values[-1]
            elif kind == STALE:
                held[at] = next(v for v in reversed(values) if v != final)
            elif kind == PHANTOM:
                held[at] = '{"half":true}'
            elif kind == "torn":
                _sample(out, at[1], at[0], '{"torn":true}', rec.states[0][2] + 2)
            else:
                _overwrite(out, rec, at, end)
            found[PHANTOM if kind == "torn" else kind] += 1
    t = end + MS
    for (_, key), value in sorted(finals.items()):
        if value is not None:
            out.add(type="state", time=t, writer="runner", store=SOURCE_STORE, key=key, value=value)
    for (store, key), value in sorted(held.items()):
        if value is not None:
            out.add(type="state", time=t + 1, writer="runner", store=store, key=key, value=value)
    for store in sorted({s for s, _ in keys}):
        out.add(type="state", time=t + 2, writer="runner", store=store)
    out.add(type="state", time=t + 2, writer="runner", store=SOURCE_STORE)
    return found


def _older(rec: _Key) -> str | None:
    """A value every version of which is older than the last sample's version."""
    if not rec.samples:
        return None
    top = rec.samples[-1][2]
    newer = {v for version, v, _ in rec.states if version >= top}
    return next((v for _, v, _ in rec.states if v is not None and v not in newer), None)


def _fits(kind: str, rec: _Key, final: str | None) -> bool:
    """Whether a key can show `kind`, planted alone."""
    values = {v for _, v, _ in rec.states if v is not None}
    if kind == MISSING:
        return final is not None
    if kind == EXTRA:
        return final is None and bool(values)
    if kind == STALE:
        return final is not None and bool(values - {final})
    if kind == PHANTOM:
        return final is not None
    if kind == "torn":
        return bool(rec.states)
    return _older(rec) is not None


def _overwrite(out: _Columns, rec: _Key, key: tuple[str, str], end: int) -> None:
    """The observer sees an older state after the last one it saw: a stale overwrite."""
    store, name = key
    _sample(out, name, store, _older(rec) or "", end - MS // 2)


def _table(out: _Columns) -> pa.Table:
    """The history in time order, `seq` numbering each writer's events."""
    table = pa.table(out.cols, schema=arrow_schema())
    table = table.take(pc.sort_indices(table, [("time", "ascending")]))
    writers = table.column("writer").combine_chunks().dictionary_encode()
    codes = writers.indices.to_numpy(zero_copy_only=False)
    by_writer = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[by_writer], codes[by_writer])
    seq = np.empty(len(codes), np.int64)
    seq[by_writer] = np.arange(len(codes)) - starts
    return table.set_column(COLUMNS.index("seq"), "seq", pa.array(seq, pa.int64()))
