"""Unique values stay unique across threads and trace back to their maker."""

from __future__ import annotations

import threading

import pytest

from driftlab.harness.history.values import UniqueValues, split_value


def test_values_are_unique_across_threads() -> None:
    values = UniqueValues("c7")
    out: list[list[str]] = [[] for _ in range(8)]

    def take(i: int) -> None:
        out[i].extend(values.next() for _ in range(5000))

    threads = [threading.Thread(target=take, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flat = [v for vs in out for v in vs]
    assert len(set(flat)) == len(flat) == 40_000
    assert sorted(split_value(v)[1] for v in flat) == list(range(1, 40_001))
    # Each thread saw its own values in increasing order.
    assert all(vs == sorted(vs, key=lambda v: split_value(v)[1]) for vs in out)


def test_values_trace_back_to_their_prefix() -> None:
    assert split_value(UniqueValues("client.3").next()) == ("client.3", 1)
    default = UniqueValues()
    assert split_value(default.next())[0] == default.prefix
    assert UniqueValues().prefix != default.prefix
    with pytest.raises(ValueError, match="without '-'"):
        UniqueValues("c-1")
    with pytest.raises(ValueError, match="not made by UniqueValues"):
        split_value("plain")
