"""Event blocks: columns of many events at once, concatenated and sorted into the
history at the end, and the vectorized string columns they are built from."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.history.reader import arrow_schema
from harness.history.schema import COLUMNS


class Blocks:
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

    def op(self, n: int, client: str | pa.Array, phase: str, f: str, **cols: object) -> None:
        """`n` op events of `client`, which is both their writer and their process."""
        self.add(n, client, type="op", process=client, phase=phase, f=f, **cols)

    def msg(self, n: int, writer: str | pa.Array, action: str, **cols: object) -> None:
        """`n` msg events of `writer`, each one step `action` of a message's life."""
        self.add(n, writer, type="msg", action=action, **cols)

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
