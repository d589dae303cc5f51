"""Writing a synthetic run folder: its config.json and its history, as Parquet with the
reader's metadata or as JSON-lines segments."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from driftlab.harness.history.reader import METADATA_KEY, ROW_GROUP_SIZE, HistoryInfo, arrow_schema
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.history.schema import RunHeader
from driftlab.harness.lab.testing.synthetic.blocks import Blocks
from driftlab.harness.lab.testing.synthetic.history import build_history, segment_span
from driftlab.harness.lab.testing.synthetic.plants import check_plant, expected_counts
from driftlab.harness.lab.testing.synthetic.writes import T0

SCENARIO = "synthetic"
INVARIANT = {"min": 0}
SEGMENT_EVENTS = 2_000_000
"""Events sorted in memory at once, about (a few hundred MB of Arrow)."""
SPILL_DIR = ".synthetic-segments"


@dataclass(frozen=True, slots=True)
class SyntheticRun:
    """What generate_history wrote."""

    run_dir: Path
    events: int
    expected: dict[str, int]  # every kind of ALL_KINDS: what a correct checker finds
    notes: dict[str, int]  # expected notes (recovered-write)


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
    segment_events: int = SEGMENT_EVENTS,
) -> SyntheticRun:
    """Like generate_history, returning the whole SyntheticRun.

    The events are cut by time into segments of about `segment_events`, spilled to a
    scratch folder in `run_dir` as they are made and sorted one segment at a time: the
    memory a history takes is its writes' arrays (a few dozen bytes per event) and one
    segment, not every event at once. Any `segment_events` gives the same history."""
    counts = check_plant(plant)
    if events < 1000:
        raise ValueError(f"events={events}: a synthetic history needs at least 1000 events")
    folder = RunDir(run_dir)
    run = folder.path
    if segment_events < 1:
        raise ValueError(f"segment_events={segment_events}: must be at least 1")
    rng = np.random.default_rng(seed)
    header = RunHeader(
        run_id=f"synthetic-{seed}-{events}",
        scenario=SCENARIO,
        seed=seed,
        params={"events": events, "plant": counts, "invariant": INVARIANT},
    )
    spill = run / SPILL_DIR
    shutil.rmtree(spill, ignore_errors=True)
    try:
        blocks = Blocks(spill, T0, segment_span(segment_events))
        notes = build_history(blocks, rng, events, counts, header, cut_short)
        run.mkdir(parents=True, exist_ok=True)
        folder.logs.mkdir(exist_ok=True)
        folder.drop_history()
        info = HistoryInfo(
            events=blocks.events,
            segments=len(blocks.writers),
            complete=not cut_short,
            header=header,
        )
        chunks = blocks.sorted_chunks(ROW_GROUP_SIZE * 8)
        if jsonl:
            _write_segments(folder.history, chunks)
        else:
            schema = arrow_schema().with_metadata({METADATA_KEY: info.to_json()})
            with pq.ParquetWriter(folder.parquet, schema, compression="zstd") as out:
                for part in chunks:
                    # Row groups as the reader writes them: Spark splits a file at them.
                    out.write_table(
                        part.replace_schema_metadata(schema.metadata),
                        row_group_size=ROW_GROUP_SIZE,
                    )
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    config = {
        "scenario": SCENARIO,
        "seed": seed,
        "params": header.params,
        "expectations": dict(expectations or {}),
    }
    folder.write_config(config)
    return SyntheticRun(run, blocks.events, expected_counts(counts), notes)


def _write_segments(hist: Path, chunks: Iterator[pa.Table]) -> None:
    """One JSON-lines segment per writer, nulls left out as the recorder does."""
    hist.mkdir(parents=True)
    with contextlib.ExitStack() as files:
        out: dict[str, TextIO] = {}
        for chunk in chunks:
            for row in chunk.to_pylist():
                w = row["writer"]
                if w not in out:
                    out[w] = files.enter_context(open(hist / f"{w}.jsonl", "w"))
                out[w].write(json.dumps({k: v for k, v in row.items() if v is not None}))
                out[w].write("\n")
