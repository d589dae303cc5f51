"""Row masks of a slice: a test asked once of each distinct value of a dictionary-coded
column, its answer looked up per row by the row's code (numpy booleans, a null row
False). The history's low-cardinality columns are read dictionary-coded
(driftlab.checkers.keyed.routing.DICTIONARY_COLUMNS); a plain column is coded first, as a
test's tables are. Routing by these masks, where DuckDB's WHERE compared every row's
strings, took a fifth less of the map side's routing CPU (docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def one_of(column: pa.ChunkedArray, *values: str) -> np.ndarray:
    """Per row, whether `column` holds one of `values`."""
    wanted = pa.array(values, pa.string())
    return _per_row(column, lambda names: pc.is_in(names, value_set=wanted))


def starts_with(column: pa.ChunkedArray, prefix: str) -> np.ndarray:
    """Per row, whether `column` starts with `prefix`."""
    return _per_row(column, lambda names: pc.starts_with(names, prefix))


def is_set(column: pa.ChunkedArray) -> np.ndarray:
    """Per row, whether `column` is set (not null)."""
    return np.concatenate(
        [np.zeros(0, bool), *(pc.is_valid(c).to_numpy(zero_copy_only=False) for c in column.chunks)]
    )


def coded(array: pa.Array) -> pa.DictionaryArray:
    """`array` dictionary-coded (as the pass reads it; a test's plain strings coded here)."""
    return array if pa.types.is_dictionary(array.type) else pc.dictionary_encode(array)


def _per_row(column: pa.ChunkedArray, test: Callable[[pa.Array], pa.Array]) -> np.ndarray:
    """`test` asked of each chunk's dictionary, its answers looked up per row."""
    out = [np.zeros(0, bool)]
    for chunk in column.chunks:
        chunk = coded(chunk)
        hit = pc.fill_null(test(chunk.dictionary), False).to_numpy(zero_copy_only=False)
        indices = chunk.indices
        if not len(hit):
            out.append(np.zeros(len(indices), bool))
            continue
        # The index buffer as it is: a null's slot holds any number, clipped, then masked.
        raw = np.frombuffer(indices.buffers()[1], indices.type.to_pandas_dtype())
        row = np.take(hit, raw[indices.offset : indices.offset + len(indices)], mode="clip")
        if indices.null_count:
            row &= pc.is_valid(indices).to_numpy(zero_copy_only=False)
        out.append(row)
    return np.concatenate(out)
