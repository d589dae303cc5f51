"""The streaming synthetic generator: events spilled by time segment and sorted one
segment at a time make the same history as one stable sort of every event by time and
writer (the generator's former way, all in memory, with writers breaking ties as the
reader's order does), whatever the segments' size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.harness.history.reader import arrow_schema
from driftlab.harness.lab.testing.synthetic import blocks as blocks_module
from driftlab.harness.lab.testing.synthetic import generate
from driftlab.harness.lab.testing.synthetic.arrays import cumcount
from driftlab.harness.lab.testing.synthetic.blocks import Blocks
from driftlab.harness.lab.testing.synthetic.run import SPILL_DIR

PLANT = {kind: 2 for kind in ALL_KINDS}


def _one_sort(tables: list[pa.Table]) -> pa.Table:
    """Every event at once, stably sorted by time and writer, `seq` numbering each
    writer's events: how the generator sorted its history before it streamed."""
    table = pa.concat_tables(tables)
    table = table.take(pc.sort_indices(table, [("time", "ascending"), ("writer", "ascending")]))
    codes = table.column("writer").combine_chunks().dictionary_encode().indices.to_numpy()
    at = table.schema.get_field_index("seq")
    return table.set_column(at, "seq", pa.array(cumcount(codes)))


def test_segments_sort_as_one_sort_of_every_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blocks spill every 50 rows, into segments 100 ns wide, over times with many ties
    # (also across blocks, which must keep the order they were added in).
    monkeypatch.setattr(blocks_module, "ADD_ROWS", 50)
    rng = np.random.default_rng(5)
    folder = tmp_path / "spill"
    blocks = Blocks(folder, t0=1_000, segment_ns=100)
    added = []
    for n in (1, 130, 0, 77, 260, 3):
        time = 1_000 + rng.integers(0, 2_000, n) // 7 * 7
        writer = np.array([f"w{i}" for i in rng.integers(0, 4, n)], dtype="U2")
        blocks.add(n, writer, type="msg", time=time, offset=np.arange(n), key=f"k{n}")
        added.append(
            pa.table(
                {
                    f.name: {
                        "writer": pa.array(writer, pa.string()),
                        "type": pa.array(["msg"] * n, pa.string()),
                        "time": pa.array(time, pa.int64()),
                        "offset": pa.array(np.arange(n), pa.int64()),
                        "key": pa.array([f"k{n}"] * n, pa.string()),
                    }.get(f.name, pa.nulls(n, f.type))
                    for f in arrow_schema()
                },
                schema=arrow_schema(),
            )
        )
    assert len(list(folder.iterdir())) > 10  # spilled while added, in many segments
    chunks = list(blocks.sorted_chunks(64))
    assert [c.num_rows for c in chunks] == [64] * 7 + [471 - 7 * 64]
    assert blocks.events == 471 and set(blocks.writers) == {"w0", "w1", "w2", "w3"}
    assert pa.concat_tables(chunks).equals(_one_sort(added))
    assert list(folder.iterdir()) == []  # each segment deleted once read


@pytest.mark.parametrize("jsonl", [False, True])
def test_segment_size_leaves_the_history_unchanged(tmp_path: Path, jsonl: bool) -> None:
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    a = generate(whole, 40_000, 4, PLANT, jsonl=jsonl, segment_events=10**9)
    b = generate(cut, 40_000, 4, PLANT, jsonl=jsonl, segment_events=1_500)
    assert (a.events, a.expected, a.notes) == (b.events, b.expected, b.notes)
    files = sorted(p.relative_to(whole) for p in whole.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(cut) for p in cut.rglob("*") if p.is_file())
    assert any(f.suffix in (".parquet", ".jsonl") for f in files)
    for f in files:
        assert (whole / f).read_bytes() == (cut / f).read_bytes(), f
    assert not (cut / SPILL_DIR).exists()


def test_too_small_a_history_writes_nothing(tmp_path: Path) -> None:
    run = tmp_path / "never"
    with pytest.raises(ValueError, match="raise `events`"):
        generate(run, 1_000, 1, {"missing": 500})
    assert not run.exists()
