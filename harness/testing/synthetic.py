"""Synthetic histories with planted anomalies of exactly known counts.

The history has the shape of a real run: client processes write account balances to the
source (some writes fail, some end `info`), each followed by a dual write to the store
`dw` and, often, a read of it; a CDC pipeline (channel `cdc.kv`, consumer `g1`) applies
every committed write to `cache`; an AMQP queue (`amqp.kv`, consumer `q1`) applies it to
`search`; an outbox publishes each change as an event-sourcing event (`events:account`,
delta and sequence number) whose projection `projection:balance` holds the balances; a
low-volume `audit` channel has its own consumer; a produce-only `mirror` channel; fault
windows; marks; and the final states of every store.

Each anomaly kind of docs/checkers.md is planted by a small, local change to that clean
history (a missing apply, a swapped delivery, a doctored final state, ...), each on its
own key, offset or partition so that plants do not interact. Some plants necessarily
show as a second kind too (an out-of-order apply is also a contradictory order);
`IMPLIED` lists those, and `generate_history` returns the counts a correct checker suite
finds, every kind included.

Everything is vectorized (numpy, pyarrow): 20M events take well under a minute. The
history is written as `history.parquet` directly, with the reader's metadata, or as
JSON-lines segments (one per writer) for small histories that should exercise the reader.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers.anomaly import ALL_KINDS
from harness.history.reader import (
    METADATA_KEY,
    ROW_GROUP_SIZE,
    HistoryInfo,
    arrow_schema,
)
from harness.history.schema import COLUMNS, SOURCE_STORE, RunHeader
from harness.rundir import RunDir

SCENARIO = "synthetic"
T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z, so runs are reproducible
MS = 1_000_000
US = 1_000

IMPLIED: dict[str, dict[str, int]] = {
    # An apply of an older version after a newer one reverses the source's order.
    "stale-overwrite": {"contradictory-order": 1},
    # Polling an offset again delivers its message again.
    "nonmonotonic-poll": {"duplicate-delivery": 1},
    # A projection value off the fold is also a value the source never held.
    "projection-mismatch": {"phantom": 1},
}
"""Kinds that a plant of the key kind necessarily shows as well, per planted anomaly."""

INVARIANT = {"min": 0}
STORES = ("cache", "search", "dw", "projection:balance")
CDC, AMQP, AUDIT, MIRROR, EVENTS = "cdc.kv", "amqp.kv", "audit", "mirror", "events:account"
N_PROCESSES = 8
N_PARTITIONS = 8
EVENTS_PER_WRITE = 12.9  # measured average of the clean history, to size it


@dataclass(frozen=True, slots=True)
class SyntheticRun:
    """What generate_history wrote."""

    run_dir: Path
    events: int
    expected: dict[str, int]  # every kind of ALL_KINDS: what a correct checker finds
    notes: dict[str, int]  # expected notes (recovered-write)


class _Blocks:
    """Columns of event blocks, concatenated into one table at the end."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []
        self.schema = arrow_schema()

    def add(self, n: int, writer: str | np.ndarray | pa.Array, **cols: object) -> None:
        """Append `n` events; each column is a scalar (broadcast), numpy or Arrow array."""
        if n == 0:
            return
        cols["writer"] = writer
        arrays = []
        for field in self.schema:
            v = cols.get(field.name)
            if v is None:
                arrays.append(pa.nulls(n, field.type))
            elif isinstance(v, (str, int, np.integer)):
                arrays.append(pa.repeat(pa.scalar(v, field.type), n))
            else:
                arrays.append(pa.array(v, field.type))
        self.tables.append(pa.Table.from_arrays(arrays, schema=self.schema))

    def sorted_chunks(self, chunk: int) -> tuple[int, list[str], Iterator[pa.Table]]:
        """(events, writers, chunks of the history in time order with `seq` set).

        Equal times keep block order (a stable sort). Chunks are taken one at a time so
        that a 20M-event history is never held twice in memory.
        """
        table = pa.concat_tables(self.tables)
        self.tables = []
        order = pc.sort_indices(table, [("time", "ascending")])
        writers = pc.take(table.column("writer"), order).combine_chunks().dictionary_encode()
        codes = writers.indices.to_numpy(zero_copy_only=False)
        by_writer = np.argsort(codes, kind="stable")
        starts = np.searchsorted(codes[by_writer], np.arange(len(writers.dictionary)))
        seq = np.empty(len(codes), np.int64)
        seq[by_writer] = np.arange(len(codes)) - np.repeat(starts, np.bincount(codes))
        at = COLUMNS.index("seq")

        def chunks() -> Iterator[pa.Table]:
            for s in range(0, table.num_rows, chunk):
                part = table.take(order[s : s + chunk])
                yield part.set_column(at, "seq", pa.array(seq[s : s + chunk]))

        return table.num_rows, writers.dictionary.to_pylist(), chunks()


def _tag(prefix: str, ints: np.ndarray) -> pa.Array:
    """Strings `prefix + str(i)`, vectorized."""
    return pc.binary_join_element_wise(prefix, pa.array(ints).cast(pa.string()), "")


def _choose(names: list[str | None], codes: np.ndarray) -> pa.Array:
    """Strings `names[code]` for each code, vectorized (None gives null)."""
    return pa.array(names, pa.string()).take(pa.array(codes))


def _strictly_increasing(t: np.ndarray) -> np.ndarray:
    """The smallest strictly increasing sequence >= a sorted `t` (breaks ties by 1 ns)."""
    idx = np.arange(len(t), dtype=np.int64)
    return np.maximum.accumulate(t - idx) + idx


def _strictly_increasing_unsorted(t: np.ndarray) -> np.ndarray:
    """The smallest strictly increasing sequence >= `t` elementwise (a running max)."""
    return _strictly_increasing(np.maximum.accumulate(t))


def _cumcount(groups: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements share its group (0-based rank)."""
    order = np.argsort(groups, kind="stable")
    sg = groups[order]
    starts = np.r_[0, np.flatnonzero(sg[1:] != sg[:-1]) + 1]
    rank_sorted = np.arange(len(sg)) - np.repeat(starts, np.diff(np.r_[starts, len(sg)]))
    out = np.empty(len(groups), np.int64)
    out[order] = rank_sorted
    return out


def _check_plant(plant: Mapping[str, int]) -> dict[str, int]:
    unknown = sorted(set(plant) - set(ALL_KINDS))
    if unknown:
        raise ValueError(
            f"cannot plant unknown kind(s) {', '.join(unknown)}; "
            f"the kinds are: {', '.join(ALL_KINDS)}"
        )
    bad = sorted(k for k, n in plant.items() if not isinstance(n, int) or n < 0)
    if bad:
        raise ValueError(f"plant counts must be integers >= 0: {', '.join(bad)}")
    return {k: plant.get(k, 0) for k in ALL_KINDS}


def expected_counts(plant: Mapping[str, int]) -> dict[str, int]:
    """The counts a correct checker suite finds for `plant`: IMPLIED kinds added."""
    counts = _check_plant(plant)
    out = dict(counts)
    for kind, extra in IMPLIED.items():
        for other, per in extra.items():
            out[other] += per * counts[kind]
    return out


def generate_history(
    run_dir: str | os.PathLike[str],
    events: int = 50_000,
    seed: int = 0,
    plant: Mapping[str, int] | None = None,
    *,
    cut_short: bool = False,
    jsonl: bool = False,
    expectations: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """Write a synthetic run (config.json and history) into `run_dir`; return the
    anomaly counts a correct checker suite finds there (every kind, planted or implied).

    `events` is approximate (the clean history's structure decides the exact number).
    `plant` maps anomaly kinds to how many to plant. `cut_short` leaves out the END
    mark. `jsonl` writes JSON-lines segments (small histories) instead of Parquet.
    `expectations` goes into config.json as is.
    """
    return generate(
        run_dir,
        events,
        seed,
        plant or {},
        cut_short=cut_short,
        jsonl=jsonl,
        expectations=expectations,
    ).expected


def generate(
    run_dir: str | os.PathLike[str],
    events: int,
    seed: int,
    plant: Mapping[str, int],
    *,
    cut_short: bool = False,
    jsonl: bool = False,
    expectations: Mapping[str, str] | None = None,
) -> SyntheticRun:
    """Like generate_history, returning the whole SyntheticRun."""
    counts = _check_plant(plant)
    if events < 1000:
        raise ValueError(f"events={events}: a synthetic history needs at least 1000 events")
    folder = RunDir(run_dir)
    run = folder.path
    rng = np.random.default_rng(seed)
    header = RunHeader(
        run_id=f"synthetic-{seed}-{events}",
        scenario=SCENARIO,
        seed=seed,
        params={"events": events, "plant": counts, "invariant": INVARIANT},
    )
    blocks = _Blocks()
    notes = _build(blocks, rng, events, counts, header, cut_short)
    run.mkdir(parents=True, exist_ok=True)
    folder.logs.mkdir(exist_ok=True)
    for stale in (folder.history, folder.parquet):
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink(missing_ok=True)
    n_events, writers, chunks = blocks.sorted_chunks(ROW_GROUP_SIZE * 8)
    info = HistoryInfo(
        events=n_events, segments=len(writers), complete=not cut_short, header=header
    )
    if jsonl:
        _write_segments(folder.history, pa.concat_tables(chunks), writers)
    else:
        schema = arrow_schema().with_metadata({METADATA_KEY: info.to_json()})
        with pq.ParquetWriter(folder.parquet, schema, compression="zstd") as out:
            for part in chunks:
                # Row groups as the reader writes them: Spark splits a file at them.
                out.write_table(
                    part.replace_schema_metadata(schema.metadata), row_group_size=ROW_GROUP_SIZE
                )
    config = {
        "scenario": SCENARIO,
        "seed": seed,
        "params": header.params,
        "expectations": dict(expectations or {}),
    }
    folder.write_config(config)
    return SyntheticRun(run, n_events, expected_counts(counts), notes)


def _write_segments(hist: Path, table: pa.Table, writers: list[str]) -> None:
    """One JSON-lines segment per writer, nulls left out as the recorder does."""
    hist.mkdir(parents=True)
    for w in writers:
        rows = table.filter(pc.equal(table.column("writer"), w)).to_pylist()
        with open(hist / f"{w}.jsonl", "w") as out:
            for row in rows:
                out.write(json.dumps({k: v for k, v in row.items() if v is not None}))
                out.write("\n")


# --- the history itself -----------------------------------------------------------------


@dataclass
class _Writes:
    """Committed source writes in commit order (the arrays the pipelines follow)."""

    i: np.ndarray  # write id
    key: np.ndarray
    ok_t: np.ndarray
    version: np.ndarray
    total: np.ndarray
    delta: np.ndarray
    is_ok: np.ndarray  # False: an `info` write that committed anyway
    proc: np.ndarray
    last: np.ndarray  # the key's last version


def _build(
    b: _Blocks,
    rng: np.random.Generator,
    events: int,
    plant: dict[str, int],
    header: RunHeader,
    cut_short: bool,
) -> dict[str, int]:
    attempts = max(200, int(events / EVENTS_PER_WRITE))
    n_keys = max(60, attempts // 12, 4 * sum(plant.values()) + 60)
    dt = 2 * MS  # 500 write attempts a second over 8 processes
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
    done_t[order] = _strictly_increasing(done_t[order])
    c = order[committed[order]]
    c_key = key[c]
    version = _cumcount(c_key) + 1
    delta = rng.integers(1, 100, len(c))
    n_ver = np.bincount(c_key, minlength=n_keys)
    last = version == n_ver[c_key]
    # Invariant plants: the key's last write withdraws more than the balance.
    inv_keys = _pick_keys(rng, n_ver, plant["invariant-violation"], set(), min_versions=2)
    taken = set(inv_keys.tolist())
    inv_rows = np.isin(c_key, inv_keys) & last
    csum = _group_cumsum(c_key, delta)
    delta[inv_rows] = -(csum[inv_rows] - delta[inv_rows]) - 1
    total = _group_cumsum(c_key, delta)
    w = _Writes(
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

    b.add(len(_writers()), np.array(_writers()), type="header", time=T0, extra=_header_json(header))
    _client_ops(b, rng, invoke, done_t, proc, key, fail, info, committed, w, plant, taken)
    windows = _fault_windows(start, int(done_t.max()))
    cdc_end = _cdc(b, rng, w, plant, taken, windows[1])
    _amqp(b, rng, w, plant, taken)
    _outbox(b, w)
    end_work = max(int(done_t.max()), cdc_end) + 5 * MS
    tail = _tail_plants(b, rng, w, plant, taken, end_work)
    _audit(b, rng, w, plant["lost-message"], end_work)
    _mirror(b, rng, w, plant)
    _faults(b, windows)
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
    t = _final_states(b, rng, w, plant, taken, t + MS)
    if not cut_short:
        b.add(1, "runner", type="mark", time=t + MS, kind="end")
    return {"recovered-write": int((~w.is_ok).sum())}


def _writers() -> list[str]:
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


def _group_cumsum(groups: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Running sum of `x` within each group, in array order."""
    order = np.argsort(groups, kind="stable")
    sx = np.cumsum(x[order])
    sg = groups[order]
    starts = np.r_[0, np.flatnonzero(sg[1:] != sg[:-1]) + 1]
    base = np.repeat(np.r_[0, sx[starts[1:] - 1]], np.diff(np.r_[starts, len(sg)]))
    out = np.empty(len(x), np.int64)
    out[order] = sx - base
    return out


def _pick_keys(
    rng: np.random.Generator, n_ver: np.ndarray, n: int, taken: set[int], min_versions: int
) -> np.ndarray:
    """`n` distinct keys not yet used by a plant with at least `min_versions` versions."""
    if n == 0:
        return np.empty(0, np.int64)
    cands = [k for k in rng.permutation(np.flatnonzero(n_ver >= min_versions)) if k not in taken]
    if len(cands) < n:
        raise ValueError(f"history too small to plant {n} anomalies; raise `events`")
    picked = np.array(cands[:n], np.int64)
    taken.update(picked.tolist())
    return picked


def _pick_rows(
    rng: np.random.Generator,
    w: _Writes,
    n: int,
    taken: set[int],
    ok: Callable[[int], bool],
    candidates: np.ndarray,
) -> list[int]:
    """`n` rows (commit ranks) from `candidates`, one per key not yet used, meeting `ok`."""
    rows: list[int] = []
    if n == 0:
        return rows
    for r in rng.permutation(candidates):
        k = int(w.key[r])
        if k in taken or not ok(int(r)):
            continue
        taken.add(k)
        rows.append(int(r))
        if len(rows) == n:
            return rows
    raise ValueError(f"history too small to plant {n} anomalies; raise `events`")


def _key_str(keys: np.ndarray) -> pa.Array:
    return _tag("acct-", keys)


def _client_ops(
    b: _Blocks,
    rng: np.random.Generator,
    invoke: np.ndarray,
    done_t: np.ndarray,
    proc: np.ndarray,
    key: np.ndarray,
    fail: np.ndarray,
    info: np.ndarray,
    committed: np.ndarray,
    w: _Writes,
    plant: dict[str, int],
    taken: set[int],
) -> None:
    """Source writes, their dual writes to `dw`, reads of `dw` (with ryw plants)."""
    n = len(invoke)
    ids = np.arange(n)
    clients = _tag("client-", proc)
    # The value a write carries: the new balance for committed writes; a failed or lost
    # attempt carries a tag no balance can equal.
    totals = np.zeros(n, np.int64)
    totals[w.i] = w.total
    value_arr = pc.if_else(pa.array(committed), pa.array(totals).cast(pa.string()), _tag("x", ids))
    ver = np.full(n, -1, np.int64)
    ver[w.i[w.is_ok]] = w.version[w.is_ok]
    ver_arr = pa.array(ver, mask=ver < 0)
    keys = _key_str(key)
    op_ids = _tag("w", ids)
    b.add(
        n,
        clients,
        type="op",
        time=invoke,
        process=clients,
        phase="invoke",
        f="write",
        op_id=op_ids,
        key=keys,
        value=value_arr,
        store=SOURCE_STORE,
    )
    outcome_code = np.where(fail, 1, np.where(info, 2, 0))
    phase = _choose(["ok", "fail", "info"], outcome_code)
    b.add(
        n,
        clients,
        type="op",
        time=done_t,
        process=clients,
        phase=phase,
        f="write",
        op_id=op_ids,
        key=keys,
        value=value_arr,
        version=ver_arr,
        store=SOURCE_STORE,
        error=_choose([None, "serialization failure", "timeout"], outcome_code),
    )

    # Dual write of every committed write to `dw`, in commit order; contradictory-order
    # plants let a write's dw effect land after the next version's (Figure 11-4).
    dw_t = w.ok_t + 100 * US
    # Rows with a next and a next-but-one version whose dw effects are far enough apart.
    nxt = _next_same_key(w.key)
    has2 = (nxt >= 0) & (np.where(nxt >= 0, nxt[np.maximum(nxt, 0)], -1) >= 0)
    co_rows = _pick_rows(
        rng,
        w,
        plant["contradictory-order"],
        taken,
        lambda r: dw_t[nxt[nxt[r]]] - dw_t[nxt[r]] > 10 * US and _ok3(w, nxt, r),
        np.flatnonzero(has2),
    )
    for r in co_rows:
        n1, n2 = nxt[r], nxt[nxt[r]]
        dw_t[r] = (dw_t[n1] + dw_t[n2]) // 2
    wclients = _tag("client-", w.proc)
    m = len(w.i)
    vals = pa.array(w.total).cast(pa.string())
    dkeys = _key_str(w.key)
    dids = _tag("d", w.i)
    b.add(
        m,
        wclients,
        type="op",
        time=w.ok_t + 20 * US,
        process=wclients,
        phase="invoke",
        f="write",
        op_id=dids,
        key=dkeys,
        value=vals,
        store="dw",
    )
    b.add(
        m,
        wclients,
        type="op",
        time=dw_t,
        process=wclients,
        phase="ok",
        f="write",
        op_id=dids,
        key=dkeys,
        value=vals,
        store="dw",
    )

    # Reads of `dw` right after a process's own ok write return that write (or, planted,
    # the key's previous balance: a read-your-writes violation).
    prev = _prev_same_key(w.key)
    ryw_ok = (w.version >= 2) & w.is_ok & (prev >= 0)
    ryw_ok &= np.where(prev >= 0, w.is_ok[np.maximum(prev, 0)], False)
    ryw_rows = _pick_rows(
        rng, w, plant["ryw-violation"], taken, lambda r: True, np.flatnonzero(ryw_ok)
    )
    reads = w.is_ok & (rng.random(m) < 0.3)
    reads[co_rows] = False
    reads[ryw_rows] = True
    r_idx = np.flatnonzero(reads)
    r_val = w.total[r_idx].copy()
    r_ver = w.version[r_idx].copy()
    planted = np.isin(r_idx, ryw_rows)
    r_val[planted] = w.total[prev[r_idx[planted]]]
    r_ver[planted] -= 1
    rclients = _tag("client-", w.proc[r_idx])
    rkeys = _key_str(w.key[r_idx])
    rids = _tag("r", w.i[r_idx])
    k = len(r_idx)
    b.add(
        k,
        rclients,
        type="op",
        time=w.ok_t[r_idx] + 110 * US,
        process=rclients,
        phase="invoke",
        f="read",
        op_id=rids,
        key=rkeys,
        store="dw",
    )
    b.add(
        k,
        rclients,
        type="op",
        time=w.ok_t[r_idx] + 160 * US,
        process=rclients,
        phase="ok",
        f="read",
        op_id=rids,
        key=rkeys,
        value=pa.array(r_val).cast(pa.string()),
        version=r_ver,
        store="dw",
    )


def _ok3(w: _Writes, nxt: np.ndarray, r: int) -> bool:
    """Row r and the key's next two writes ended `ok`, so their versions are known at
    the source (an `info` write has none, and no order can be judged on it)."""
    return bool(w.is_ok[r] and w.is_ok[nxt[r]] and w.is_ok[nxt[nxt[r]]])


def _next_same_key(keys: np.ndarray) -> np.ndarray:
    """Index of the next row with the same key (rows in commit order), or -1."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    nxt = np.full(len(keys), -1, np.int64)
    same = sk[1:] == sk[:-1]
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def _prev_same_key(keys: np.ndarray) -> np.ndarray:
    """Index of the previous row with the same key (rows in commit order), or -1."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    prev = np.full(len(keys), -1, np.int64)
    same = sk[1:] == sk[:-1]
    prev[order[1:][same]] = order[:-1][same]
    return prev


def _cdc(
    b: _Blocks,
    rng: np.random.Generator,
    w: _Writes,
    plant: dict[str, int],
    taken: set[int],
    crash: _Window,
) -> int:
    """Produce, deliver to g1, apply to `cache`, periodic commits; CDC-side plants.
    Delivery lags 0.5-20 ms, and whatever `crash` holds back comes after it, in offset
    order per partition. Returns the time of the last event."""
    m = len(w.i)
    part = w.key % N_PARTITIONS
    offset = _cumcount(part)
    produce_t = w.ok_t + 200 * US
    due = produce_t + (rng.gamma(2.0, 1.5, m).clip(0.5, 20.0) * MS).astype(np.int64)
    held = (produce_t >= crash.start) & (produce_t < crash.stop)
    due[held] = np.maximum(due[held], crash.stop + 50 * MS)
    # Offset order per partition: one strictly increasing pass over all partitions,
    # each shifted far beyond the run's span.
    by_part = np.lexsort((offset, part))
    shift = part[by_part] * (1 << 50)
    deliver_t = np.empty(m, np.int64)
    deliver_t[by_part] = _strictly_increasing_unsorted(due[by_part] - T0 + shift) - shift + T0
    apply_t = deliver_t + 100 * US
    msg = _tag("m", w.i)
    keys = _key_str(w.key)
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
    b.add(m, "cdc", type="msg", time=produce_t, action="produce", process="cdc", **common)

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

    skip_rows = _pick_rows(rng, w, plant["poll-skip"], taken, clear, np.arange(m))
    proc_code = np.zeros(m, np.int64)
    for i, r in enumerate(skip_rows):
        mark(r)
        proc_code[r] = i + 1
    proc_names = ["g1-0", *[f"g1-s{i}" for i in range(len(skip_rows))]]
    repoll = _pick_rows(rng, w, plant["nonmonotonic-poll"], taken, clear, np.arange(m))
    for r in repoll:
        mark(r)
    b.add(
        m,
        "g1",
        type="msg",
        time=deliver_t,
        action="deliver",
        consumer="g1",
        process=_choose(proc_names, proc_code),
        attempt=1,
        **common,
    )
    if repoll:
        rp = np.array(repoll)
        again = deliver_t[rp] + (deliver_t[nxt_p[rp]] - deliver_t[rp]) // 3
        sub = {k: _take(v, rp) for k, v in common.items()}
        b.add(
            len(rp),
            "g1",
            type="msg",
            time=again,
            action="deliver",
            consumer="g1",
            process="g1-0",
            attempt=2,
            **sub,
        )
        b.add(
            len(rp),
            "g1",
            type="msg",
            time=again + 1,
            action="skip",
            consumer="g1",
            process="g1-0",
            store="cache",
            **sub,
        )

    # Lost writes: delivered, never applied (not the key's last write, so the final
    # state is right). Stale overwrites: an apply delayed past the next version's.
    nxt = _next_same_key(w.key)
    has_next = w.is_ok & (nxt >= 0)
    lost = _pick_rows(rng, w, plant["lost-write"], taken, lambda r: True, np.flatnonzero(has_next))
    has2 = (nxt >= 0) & (np.where(nxt >= 0, nxt[np.maximum(nxt, 0)], -1) >= 0)
    late = _pick_rows(
        rng,
        w,
        plant["stale-overwrite"],
        taken,
        lambda r: apply_t[nxt[nxt[r]]] - apply_t[nxt[r]] > 10 * US and _ok3(w, nxt, r),
        np.flatnonzero(has2),
    )
    for r in late:
        apply_t[r] = (apply_t[nxt[r]] + apply_t[nxt[nxt[r]]]) // 2
    applied = np.ones(m, bool)
    applied[lost] = False
    a = np.flatnonzero(applied)
    b.add(
        len(a),
        "g1",
        type="msg",
        time=apply_t[a],
        action="apply",
        consumer="g1",
        process=_choose(proc_names, proc_code[a]),
        store="cache",
        **{k: _take(v, a) for k, v in common.items()},
    )

    # Commits every 50 offsets of a partition, after the delivery.
    cm = np.flatnonzero(offset % 50 == 49)
    b.add(
        len(cm),
        "g1",
        type="msg",
        time=deliver_t[cm] + 150 * US,
        action="commit",
        consumer="g1",
        process="g1-0",
        channel=CDC,
        partition=part[cm],
        offset=offset[cm] + 1,
    )
    return int(max(apply_t.max(), deliver_t.max() + 150 * US))


def _take(v: object, idx: np.ndarray) -> object:
    if isinstance(v, np.ndarray):
        return v[idx]
    if isinstance(v, pa.Array):
        return v.take(pa.array(idx))
    return v


def _amqp(
    b: _Blocks, rng: np.random.Generator, w: _Writes, plant: dict[str, int], taken: set[int]
) -> None:
    """Produce, deliver to q1, apply to `search`, ack; reorder-delivery plants swap two
    consecutive versions of a key in delivery (the older one is then skipped)."""
    m = len(w.i)
    produce_t = w.ok_t + 300 * US
    deliver_t = produce_t + 2 * MS
    msg = _tag("a", w.i)
    keys = _key_str(w.key)
    vals = pa.array(w.total).cast(pa.string())
    common = dict(channel=AMQP, msg_id=msg, key=keys, value=vals, version=w.version)
    b.add(m, "amqp", type="msg", time=produce_t, action="produce", process="amqp", **common)
    nxt = _next_same_key(w.key)
    swap = _pick_rows(
        rng, w, plant["reorder-delivery"], taken, lambda r: True, np.flatnonzero(nxt >= 0)
    )
    for r in swap:
        deliver_t[r], deliver_t[nxt[r]] = deliver_t[nxt[r]], deliver_t[r]
    skipped = np.zeros(m, np.int64)
    skipped[swap] = 1
    b.add(
        m,
        "q1",
        type="msg",
        time=deliver_t,
        action="deliver",
        consumer="q1",
        process="q1-0",
        attempt=1,
        **common,
    )
    b.add(
        m,
        "q1",
        type="msg",
        time=deliver_t + 100 * US,
        action=_choose(["apply", "skip"], skipped),
        consumer="q1",
        process="q1-0",
        store="search",
        **common,
    )
    b.add(
        m,
        "q1",
        type="msg",
        time=deliver_t + 150 * US,
        action="ack",
        consumer="q1",
        process="q1-0",
        channel=AMQP,
        msg_id=msg,
    )


def _outbox(b: _Blocks, w: _Writes) -> None:
    """Every committed change as an event of its account: the delta, its sequence."""
    m = len(w.i)
    b.add(
        m,
        "outbox",
        type="msg",
        time=w.ok_t + 250 * US,
        action="produce",
        process="outbox",
        channel=EVENTS,
        partition=0,
        offset=np.arange(m),
        msg_id=_tag("e", w.i),
        key=_key_str(w.key),
        value=pa.array(w.delta).cast(pa.string()),
        version=w.version,
    )


def _tail_plants(
    b: _Blocks, rng: np.random.Generator, w: _Writes, plant: dict[str, int], taken: set[int], t: int
) -> int:
    """After the workload: redeliveries of a key's last write to a restarted consumer
    instance (duplicate-delivery), re-applies of a key's last write (duplicate-apply).
    Returns the time after them."""
    lasts = np.flatnonzero(w.last)
    part = w.key % N_PARTITIONS
    offset = _cumcount(part)
    for kind in ("duplicate-delivery", "duplicate-apply"):
        rows = _pick_rows(rng, w, plant[kind], taken, lambda r: True, lasts)
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
            if kind == "duplicate-delivery":
                proc = f"g1-r{n}"
                b.add(1, "g1", type="msg", time=t, action="deliver", process=proc, attempt=2, **ev)
                b.add(
                    1,
                    "g1",
                    type="msg",
                    time=t + 10 * US,
                    action="skip",
                    process=proc,
                    store="cache",
                    **ev,
                )
            else:
                b.add(
                    1, "g1", type="msg", time=t, action="apply", process="g1-0", store="cache", **ev
                )
            t += 100 * US
    return t


def _audit(b: _Blocks, rng: np.random.Generator, w: _Writes, lost: int, end: int) -> None:
    """One audit message per 20 changes on partitions 0-1, all delivered to g-audit;
    lost-message plants sit alone on partitions g-audit was never assigned."""
    sel = np.flatnonzero(np.arange(len(w.i)) % 20 == 0)
    part = np.arange(len(sel)) % 2
    off = _cumcount(part)
    t = w.ok_t[sel] + 400 * US
    common = dict(
        channel=AUDIT, partition=part, offset=off, msg_id=_tag("au", sel), key=_key_str(w.key[sel])
    )
    b.add(len(sel), "audit", type="msg", time=t, action="produce", process="audit", **common)
    b.add(
        len(sel),
        "g-audit",
        type="msg",
        time=t + 500 * US,
        action="deliver",
        consumer="g-audit",
        process="g-audit-0",
        attempt=1,
        **common,
    )
    n = np.arange(lost)
    b.add(
        lost,
        "audit",
        type="msg",
        time=end - 4 * MS + n * US,
        action="produce",
        process="audit",
        channel=AUDIT,
        partition=2 + n,
        offset=0,
        msg_id=_tag("lost", n),
        key=_key_str(rng.integers(0, 10, lost)),
    )


def _mirror(b: _Blocks, rng: np.random.Generator, w: _Writes, plant: dict[str, int]) -> None:
    """A produce-only mirror of one change in 50 on partition 0. inconsistent-offset
    plants: a second producer writes another message at an offset already held (an
    unclean leader election). duplicate-offset plants: a message written again after
    the mirror's last one (a retry without idempotence). nonmonotonic-send plants: a
    producer of its own on partition 1 whose second acknowledged offset is below its
    first."""
    sel = np.flatnonzero(np.arange(len(w.i)) % 50 == 0)
    t = w.ok_t[sel] + 500 * US
    b.add(
        len(sel),
        "mirror",
        type="msg",
        time=t,
        action="produce",
        process="mirror",
        channel=MIRROR,
        partition=0,
        offset=np.arange(len(sel)),
        msg_id=_tag("mi", sel),
    )
    conflicts, dups = plant["inconsistent-offset"], plant["duplicate-offset"]
    if max(conflicts, dups) > len(sel):
        raise ValueError(
            f"history too small to plant {conflicts} inconsistent and {dups} duplicate offsets"
        )
    at = np.sort(rng.choice(len(sel), conflicts, replace=False))
    b.add(
        conflicts,
        "mirror",
        type="msg",
        time=t[at] + 1,
        action="produce",
        process="mirror-b",
        channel=MIRROR,
        partition=0,
        offset=at,
        msg_id=_tag("mx", at),
    )
    again = np.sort(rng.choice(len(sel), dups, replace=False))
    n = np.arange(dups)
    b.add(
        dups,
        "mirror",
        type="msg",
        time=t[-1] + (n + 1) * US,
        action="produce",
        process="mirror",
        channel=MIRROR,
        partition=0,
        offset=len(sel) + n,
        msg_id=_tag("mi", sel[again]),
    )
    sends = plant["nonmonotonic-send"]
    n = np.arange(sends)
    for step, offset in ((0, 2 * n + 1), (1, 2 * n)):  # offset 2n + 1 acknowledged, then 2n
        b.add(
            sends,
            "mirror",
            type="msg",
            time=t[0] + (2 * n + step) * US,
            action="produce",
            process=_tag("mirror-r", n),
            channel=MIRROR,
            partition=1,
            offset=offset,
            msg_id=_tag(f"mr{step}-", n),
        )


@dataclass(frozen=True, slots=True)
class _Window:
    fault_id: str
    kind: str
    target: str
    start: int
    stop: int


def _fault_windows(start: int, end: int) -> list[_Window]:
    """Three fault windows spread over the workload, the second a consumer crash."""
    span = end - start
    specs = [("partition", "kafka-connect"), ("crash", "consumer:g1"), ("latency", "redis")]
    out = []
    for n, (kind, target) in enumerate(specs):
        t0 = start + span * (2 * n + 1) // 7
        out.append(_Window(f"f{n + 1}", kind, target, t0, t0 + span // 10))
    return out


def _faults(b: _Blocks, windows: list[_Window]) -> None:
    for win in windows:
        for phase, t in (("start", win.start), ("stop", win.stop)):
            b.add(
                1,
                "nemesis",
                type="fault",
                time=t,
                phase=phase,
                kind=win.kind,
                target=win.target,
                fault_id=win.fault_id,
            )


def _final_states(
    b: _Blocks, rng: np.random.Generator, w: _Writes, plant: dict[str, int], taken: set[int], t: int
) -> int:
    """Every store's final state (each key's last balance), with divergence and
    projection plants; returns the time after them."""
    lasts = np.flatnonzero(w.last)
    keys = w.key[lasts]
    vals = w.total[lasts].astype(str).astype(object)
    b.add(
        len(lasts),
        "runner",
        type="state",
        time=t,
        store=SOURCE_STORE,
        key=_key_str(keys),
        value=pa.array(vals, pa.string()),
        version=w.version[lasts],
    )
    pos = {int(k): n for n, k in enumerate(keys)}
    prev = _prev_same_key(w.key)
    for store in STORES:
        t += MS
        v = vals.copy()
        keep = np.ones(len(keys), bool)
        extra: list[tuple[str, str]] = []
        if store == "cache":
            for r in _pick_rows(rng, w, plant["missing"], taken, lambda r: True, lasts):
                keep[pos[int(w.key[r])]] = False
            for r in _pick_rows(rng, w, plant["stale"], taken, lambda r: prev[r] >= 0, lasts):
                v[pos[int(w.key[r])]] = str(w.total[prev[r]])
            for n, r in enumerate(
                _pick_rows(rng, w, plant["phantom"], taken, lambda r: True, lasts)
            ):
                v[pos[int(w.key[r])]] = str(-7_000_000 - n)
            extra = [(f"ghost-{n}", str(n)) for n in range(plant["extra"])]
        if store == "projection:balance":
            for r in _pick_rows(rng, w, plant["projection-mismatch"], taken, lambda r: True, lasts):
                v[pos[int(w.key[r])]] = str(int(w.total[r]) + 7)
        k = np.flatnonzero(keep)
        b.add(
            len(k),
            "runner",
            type="state",
            time=t,
            store=store,
            key=_key_str(keys[k]),
            value=pa.array(v[k], pa.string()),
        )
        if extra:
            b.add(
                len(extra),
                "runner",
                type="state",
                time=t,
                store=store,
                key=pa.array([e[0] for e in extra]),
                value=pa.array([e[1] for e in extra]),
            )
    return t + MS


def main(argv: list[str] | None = None) -> None:
    """`python -m harness.testing.synthetic`: a synthetic run under runs/, with every
    kind planted and expected present; runs/latest points at it."""
    parser = argparse.ArgumentParser(
        prog="python -m harness.testing.synthetic",
        description="Write a synthetic run with planted anomalies (then: driftlab analyze "
        "runs/latest).",
    )
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="runs directory")
    parser.add_argument("--events", type=int, default=200_000, help="about this many events")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--plant-each", type=int, default=3, help="anomalies per kind")
    parser.add_argument("--jsonl", action="store_true", help="JSON-lines segments")
    args = parser.parse_args(argv)
    plant = {kind: args.plant_each for kind in ALL_KINDS}
    expect = {k: "present" for k, n in expected_counts(plant).items() if n}
    run = RunDir.create(args.runs, SCENARIO, args.seed).path
    try:
        expected = generate_history(
            run, args.events, args.seed, plant, jsonl=args.jsonl, expectations=expect
        )
    except ValueError as e:
        parser.error(str(e))
    print(f"{run}: planted {sum(expected.values())} anomalies of {len(expect)} kinds")


if __name__ == "__main__":
    main()
