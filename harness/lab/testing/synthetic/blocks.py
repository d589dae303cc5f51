"""Event blocks: columns of many events at once, cut by time into segments spilled to
disk as they are added, then sorted segment by segment into the history; and the
vectorized string columns they are built from."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from driftlab.harness.history.reader import arrow_schema
from driftlab.harness.history.schema import COLUMNS
from driftlab.harness.lab.testing.synthetic.arrays import cumcount

ADD_ROWS = 1 << 20
"""Rows of a block turned into Arrow at once: a block of every write of a 100M-event
history is millions of rows, and only this many are held as Arrow columns at a time."""


HISTORY_ORDER = [("time", "ascending"), ("writer", "ascending")]
"""The order of a segment's events: the reader's order (time, writer, seq) before `seq`
is set, so that a history is in order (driftlab.checkers.keyed.facts.Facts.ordered)."""


class Blocks:
    """Event blocks, spilled to `folder` as they are added: one lz4 Arrow IPC stream per
    time segment (`segment_ns` wide from `t0`), each holding its events in block order.

    Events come out in driftlab's history order, by time and then writer (as the reader
    sorts a run's segments; `seq` then numbers each writer's events), equal times of one
    writer in block order, as a stable sort of all blocks would: a segment is sorted
    alone (stably, so block order breaks ties) and segments follow each other in time,
    so the history comes out the same as one sort of every event, with only one segment
    in memory at a time.
    """

    def __init__(self, folder: Path, t0: int, segment_ns: int) -> None:
        self.schema = arrow_schema()
        self.folder = folder
        self.t0 = t0
        self.segment_ns = segment_ns
        self.events = 0
        self.writers: dict[str, None] = {}  # first added first; a dict keeps the order
        self._streams: dict[int, pa.ipc.RecordBatchStreamWriter] = {}
        self._options = pa.ipc.IpcWriteOptions(compression="lz4")
        # Small histories never touch the disk: a plant that does not fit raises
        # before anything is written.
        self._held: list[pa.Table] = []
        self._held_rows = 0

    def add(self, n: int, writer: str | np.ndarray | pa.Array, **cols: object) -> None:
        """Append `n` events; each column is a scalar (broadcast), numpy or Arrow array."""
        cols["writer"] = writer
        for s in range(0, n, ADD_ROWS):
            rows = min(ADD_ROWS, n - s)
            arrays = []
            for field in self.schema:
                v = cols.get(field.name)
                if v is None:
                    arrays.append(pa.nulls(rows, field.type))
                elif isinstance(v, (str, int, np.integer)):
                    arrays.append(pa.repeat(pa.scalar(v, field.type), rows))
                elif isinstance(v, pa.Array):
                    arrays.append(v.slice(s, rows).cast(field.type))
                else:
                    arrays.append(pa.array(np.asarray(v)[s : s + rows], field.type))
            table = pa.Table.from_arrays(arrays, schema=self.schema)
            self.events += rows
            for w in pc.unique(table.column("writer")).to_pylist():
                self.writers.setdefault(w, None)
            self._held.append(table)
            self._held_rows += rows
            if self._held_rows >= ADD_ROWS:
                self._spill()

    def _spill(self) -> None:
        """Append the held blocks' rows to the segments their times fall in."""
        if not self._held:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        table = pa.concat_tables(self._held)
        self._held, self._held_rows = [], 0
        seg = (table.column("time").to_numpy() - self.t0) // self.segment_ns
        # A stable order by segment keeps block order within each segment.
        order = np.argsort(seg, kind="stable")
        table, seg = table.take(order), seg[order]
        keys, starts = np.unique(seg, return_index=True)
        for k, s, e in zip(keys.tolist(), starts, [*starts[1:], len(seg)], strict=True):
            if k not in self._streams:
                path = self.folder / f"{k:012d}.arrows"
                self._streams[k] = pa.ipc.new_stream(path, self.schema, options=self._options)
            self._streams[k].write_table(table.slice(s, e - s))

    def op(self, n: int, client: str | pa.Array, phase: str, f: str, **cols: object) -> None:
        """`n` op events of `client`, which is both their writer and their process."""
        self.add(n, client, type="op", process=client, phase=phase, f=f, **cols)

    def msg(self, n: int, writer: str | pa.Array, action: str, **cols: object) -> None:
        """`n` msg events of `writer`, each one step `action` of a message's life."""
        self.add(n, writer, type="msg", action=action, **cols)

    def sorted_chunks(self, chunk: int) -> Iterator[pa.Table]:
        """The history in time order, `seq` set (each writer's events numbered from 0),
        in tables of `chunk` rows (the last one shorter), whatever the segments' sizes:
        reads one segment at a time and deletes it."""
        pending: list[pa.Table] = []
        held = 0
        for table in self._sorted_segments():
            while table.num_rows:
                take = min(chunk - held, table.num_rows)
                pending.append(table.slice(0, take))
                table = table.slice(take)
                held += take
                if held == chunk:
                    yield pa.concat_tables(pending)
                    pending, held = [], 0
        if pending:
            yield pa.concat_tables(pending)

    def _sorted_segments(self) -> Iterator[pa.Table]:
        """Each segment in time order, sorted by time and writer, `seq` set."""
        self._spill()
        for stream in self._streams.values():
            stream.close()
        keys = sorted(self._streams)
        self._streams = {}
        at = COLUMNS.index("seq")
        seen: dict[str, int] = {}
        for k in keys:
            path = self.folder / f"{k:012d}.arrows"
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_stream(source).read_all()
            path.unlink()
            table = table.take(pc.sort_indices(table, HISTORY_ORDER))
            writers = table.column("writer").combine_chunks().dictionary_encode()
            codes = writers.indices.to_numpy(zero_copy_only=False)
            names = writers.dictionary.to_pylist()
            base = np.array([seen.get(w, 0) for w in names], np.int64)
            for w, count in zip(names, np.bincount(codes, minlength=len(names)), strict=True):
                seen[w] = seen.get(w, 0) + int(count)
            yield table.set_column(at, "seq", pa.array(base[codes] + cumcount(codes)))


def tag(prefix: str, ints: np.ndarray) -> pa.Array:
    """Strings `prefix + str(i)`, vectorized."""
    return pc.binary_join_element_wise(prefix, pa.array(ints).cast(pa.string()), "")


def choose(names: list[str | None], codes: np.ndarray) -> pa.Array:
    """Strings `names[code]` for each code, vectorized (None gives null)."""
    return pa.array(names, pa.string()).take(pa.array(codes))


def key_str(keys: np.ndarray) -> pa.Array:
    """The keys' names, `acct-<n>`."""
    return tag("acct-", keys)


def take_rows(v: object, idx: np.ndarray) -> object:
    """The rows `idx` of a column given to `Blocks.add` (a scalar stays as it is)."""
    if isinstance(v, np.ndarray):
        return v[idx]
    if isinstance(v, pa.Array):
        return v.take(pa.array(idx))
    return v
