"""The keyed pass in Spark: one job of two stages, Arrow all the way.

1. Map: each task reads one row group of the history's Parquet with pyarrow, routes its
   rows to the groups that judge them and cuts them into buckets by group
   (checkers.keyed.routing), and emits each bucket's rows as Arrow IPC blobs together
   with its share of the Facts, the latter to every bucket.
2. Reduce: Spark shuffles the blobs by bucket; each partition merges the Facts shares
   (every map task's, so the whole history's), then runs every check of its groups in
   one step (checkers.keyed.step.partition_step) and writes its rows (OUTPUT_DDL) to a
   Parquet file of its own. Only the clock's span comes back to the driver.

Rows never go through Spark's row format: the JVM schedules the tasks and moves a few
blobs per task, and a history of N events costs one scan, not one per checker. The
workers read the history and write the rows by path, so with a cluster the run folder
must be on storage every worker sees (as for any Spark input).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from checkers.keyed.routing import FactShare, route, with_positions
from checkers.keyed.step import output_schema, partition_step
from checkers.keyed.timeline import series_rows
from checkers.series import bucket_seconds
from harness.history.errors import HistoryError

ROWS_PER_PARTITION = 400_000
"""Routed rows per partition of the pass: enough that a small history is one or two
tasks (each task costs a Python worker round trip), few enough that a partition's
Arrow table and events fit a worker's memory whatever the history's size."""
CHUNK_ROWS = 50_000
"""Rows per shuffled blob: whole buckets of a large row group would be blobs of tens
of megabytes, each held whole by the JVM's shuffle."""
_FACTS, _ROWS, _SERIES = "f", "r", "s"
_CORRUPT = "driftlab: unreadable row group"
"""How a task names a row group it cannot read, for the driver to tell the user."""


def keyed_pass(
    spark: SparkSession, history: Path, out_dir: Path, rows: int, per_kind: int = 5
) -> tuple[int, int]:
    """Run every check on the history's Parquet `history` of `rows` events; each
    partition writes its rows (checkers.keyed.step.OUTPUT_DDL) to `out_dir`, with up to
    `per_kind` example candidates of each kind. Returns the history's clock span
    (first and last event time, ns)."""
    sc = spark.sparkContext
    meta = pq.ParquetFile(history).metadata
    slices, first = [], 0
    for i in range(meta.num_row_groups):
        slices.append((i, first))
        first += meta.row_group(i).num_rows
    cores = sc.defaultParallelism
    # A whole number of waves of tasks: 5 buckets on 2 cores would be 3 waves.
    buckets = cores * max(1, -(-2 * rows // (ROWS_PER_PARTITION * cores)))
    out_dir.mkdir(parents=True, exist_ok=True)
    path, out = str(history), str(out_dir)

    def map_slice(piece: tuple[int, int]) -> Iterator[tuple[int, tuple[str, Any]]]:
        group, first = piece
        try:
            table = pq.ParquetFile(path).read_row_group(group)
        except (OSError, pa.ArrowException) as e:
            raise RuntimeError(f"{_CORRUPT} {group}: {e}") from None
        routed = route(with_positions(table, first), buckets)
        for b in range(buckets):
            yield b, (_FACTS, routed.share)
        for kind, parts in ((_ROWS, routed.buckets), (_SERIES, routed.series)):
            for b, part in parts.items():
                for start in range(0, part.num_rows, CHUNK_ROWS):
                    yield b, (kind, _to_ipc(part.slice(start, CHUNK_ROWS)))

    def reduce_bucket(index: int, items: Iterator[Any]) -> Iterator[tuple[int, int]]:
        share = FactShare()
        blobs: dict[str, list[bytes]] = {_ROWS: [], _SERIES: []}
        for _, (kind, data) in items:
            if kind == _FACTS:
                share.merge(data)
            else:
                blobs[kind].append(data)
        facts = share.facts()
        with pq.ParquetWriter(f"{out}/part-{index:05d}.parquet", output_schema()) as writer:
            if blobs[_SERIES]:
                series = pa.concat_tables(_from_ipc(b) for b in blobs.pop(_SERIES))
                bucket_s = bucket_seconds(facts.t0_ns, facts.t1_ns)
                writer.write_table(series_rows(series, facts.t0_ns, bucket_s))
            if blobs[_ROWS]:
                table = pa.concat_tables(_from_ipc(b) for b in blobs.pop(_ROWS))
                for batch in partition_step(facts, per_kind)(iter(table.to_batches())):
                    writer.write_batch(batch)
        if share.t0 is not None and share.t1 is not None:
            yield share.t0, share.t1

    if not slices:
        pq.write_table(output_schema().empty_table(), out_dir / "part-00000.parquet")
        return 0, 0
    try:
        spans = (
            sc.parallelize(slices, len(slices))
            .flatMap(map_slice)
            .partitionBy(buckets, _identity)
            .mapPartitionsWithIndex(reduce_bucket)
            .collect()
        )
    except Py4JJavaError as e:
        found = re.search(rf"{_CORRUPT} (\d+): ([^\n]*)", str(e))
        if found is None:
            raise
        raise HistoryError(
            f"{history} cannot be read (corrupt); delete it and analyse again to rebuild "
            f"it from history/*.jsonl (row group {found[1]} of {meta.num_row_groups}: "
            f"{found[2][:200]})"
        ) from None
    return min((s[0] for s in spans), default=0), max((s[1] for s in spans), default=0)


def _identity(bucket: int) -> int:
    """Bucket b goes to partition b: the buckets are already spread by group hash."""
    return bucket


def _to_ipc(table: pa.Table) -> bytes:
    # zstd shrinks the blobs about 4x for less time than copying them whole: the
    # bytes cross the Python-JVM sockets twice and the shuffle's disk once.
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(blob).read_all()
