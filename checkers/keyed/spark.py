"""The keyed pass in Spark: three jobs, the driver between them, Arrow all the way.

1. Map: each task reads a slice of the history's Parquet (a few row groups) with
   pyarrow, routes its rows to the groups that judge them and cuts them into buckets
   by group (driftlab.checkers.keyed.routing). It writes each bucket's rows to a file of the
   pass's exchange folder (Arrow IPC, lz4 unless local: EXCHANGE_PLAIN_ROWS), each
   route's rows in batches of their own, and tells the driver the files' names, the
   work they hold (driftlab.checkers.keyed.routes.work) and its share of the Facts.
2. Reduce: the driver merges the shares into the whole history's Facts and hands each
   task one bucket's files, the largest bucket first. A task reads its files, runs every
   check of its groups in one step (driftlab.checkers.keyed.step.partition_step) and writes
   its rows (OUTPUT_DDL), cut for the summary (driftlab.checkers.figures.summary_parts), to
   files again.
3. Summary: each task adds up one part's rows into a small part of the figures
   (driftlab.checkers.figures.summarize); part 0 writes the sorted anomalies. Only those parts
   come back to the driver.

A small history (WHOLE_ROWS) takes the three steps in a row in one task of one job:
one slice, one bucket, one summary part.

Rows never go through Spark's row format, nor through the JVM: Spark schedules the
tasks, and the driver gets file names, Facts shares and the figures (kilobytes). Through
Spark's shuffle, the 5M-event benchmark's routed rows (about 470 MB of blobs) crossed
the Python-JVM sockets twice and cost the JVM two seconds of CPU beside the Python
workers; through files the pass took about a tenth less. Through the driver instead of
a shuffle, each stage's end costs a job's start: three no-op jobs of this shape took
0.23 s on 2 cores, one job of three stages with shuffles 0.55 s. A history of N events
costs one scan, not one per checker. The workers read the history, exchange the routed
rows and write the anomalies by path, beside the anomalies' file: with a cluster, the
run folder must be on storage every worker sees (as for any Spark input).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from driftlab.checkers.figures import PassFigures, merged, summarize, summary_parts, with_buckets
from driftlab.checkers.keyed.columns import ROUTE_COLUMN
from driftlab.checkers.keyed.facts import Facts
from driftlab.checkers.keyed.routes import runs, work
from driftlab.checkers.keyed.routing import DICTIONARY_COLUMNS, FactShare, route, with_positions
from driftlab.checkers.keyed.step import output_schema, partition_step
from driftlab.checkers.keyed.timeline import series_rows
from driftlab.checkers.series import bucket_seconds
from driftlab.harness.history.errors import HistoryError

ROWS_PER_PARTITION = 1_600_000
"""Twice the routed rows of a partition of the pass, about: enough that a small history
is one or two tasks (each task costs a Python worker round trip and a sieve's score of
queries), few enough that a partition's Arrow table and events fit a worker's memory
whatever the history's size. Half this (with the rows exchanged through files) made the
5M pass 4-11% slower, the 1M pass 8%."""
ROWS_PER_SLICE = 500_000
"""History events per map task, about: a few row groups."""
WHOLE_ROWS = 100_000
"""A history of at most this many events is judged whole by one task: the map, reduce
and summary steps in a row, in one job. A small run's three stages cost more than its
checks (a 10k-event history: 0.45 s of checks, three stages' round trips and shuffles
beside them), and under load each stage's Python worker waited for the CPU
again."""
CHUNK_ROWS = 50_000
"""Rows per Arrow batch of an exchanged file, at most: a whole bucket of a large
slice in one batch would be tens of megabytes held whole at once."""
EXCHANGE_PLAIN_ROWS = 10_000_000
"""With a local master, the routed rows of a history of at most this many events are
exchanged uncompressed; a larger history's, or any through a cluster's shared storage,
lz4-compressed (a third of the bytes). Uncompressed, a reduce task maps its files and
reads them in place: the 5M pass's map tasks wrote them in 0.7 CPU seconds instead of
2.3, and the reduce tasks read them in 0.1 instead of 1.3 (of some 24 s of the pass's
CPU). They take about 330 bytes an event (1.6 GB at 5M events, 3.3 times lz4's), which
the page cache holds until the pass deletes them; at 10M, 3.2 GB nears the kernel's
default limit of dirty pages (vm.dirty_ratio, 20% of the available memory: 4 GB on a
20 GB machine), past which it makes the map tasks wait for the disk, and a 100M
history's would be 32 GB."""
PASS_JOBS = 3
"""The Spark jobs of a pass over a history of more than WHOLE_ROWS events (one for a
smaller one): map, reduce and summary."""
_ROWS, _SERIES, _PARTS = "r", "s", "p"
_CORRUPT = "driftlab: unreadable row group"
_UNSEEN = "driftlab: no such file"
"""How a task names a row group it cannot read, or a file it cannot find, for the
driver to tell the user."""


@dataclass
class PassResult:
    """What the keyed pass gives the driver: the figures and the history's clock span
    (first and last event time, ns)."""

    figures: PassFigures
    t0_ns: int
    t1_ns: int


def keyed_pass(
    spark: SparkSession,
    history: Path,
    anomalies: Path,
    rows: int,
    per_kind: int = 5,
    rows_per_slice: int = ROWS_PER_SLICE,
    whole_rows: int = WHOLE_ROWS,
) -> PassResult:
    """Run every check on the history's Parquet `history` of `rows` events, write its
    anomalies, sorted, to `anomalies` (Parquet) and add up the rest, with up to
    `per_kind` examples of each kind; each map task reads about `rows_per_slice`
    events, and a history of at most `whole_rows` events is judged by one task. The
    routed rows go through a folder beside `anomalies`, removed after."""
    exchange = Path(tempfile.mkdtemp(prefix=".exchange-", dir=anomalies.parent))
    try:
        whole = rows <= whole_rows
        return _keyed_pass(
            spark, history, anomalies, exchange, rows, per_kind, rows_per_slice, whole
        )
    finally:
        shutil.rmtree(exchange, ignore_errors=True)


@dataclass
class _Mapped:
    """What a map task tells the driver of its slice: its share of the Facts, and per
    bucket its exchange files (kind, path) and the work of its routed rows
    (driftlab.checkers.keyed.routes.work)."""

    share: FactShare
    files: dict[int, list[tuple[str, str]]]
    work: dict[int, int]


def _keyed_pass(
    spark: SparkSession,
    history: Path,
    anomalies: Path,
    exchange: Path,
    rows: int,
    per_kind: int,
    rows_per_slice: int,
    whole: bool,
) -> PassResult:
    """keyed_pass, its routed rows exchanged through the folder `exchange`; judged by
    one task if `whole`."""
    sc = spark.sparkContext
    meta = pq.ParquetFile(history).metadata
    cores = sc.defaultParallelism
    slices = _slices(meta, 1 if whole else cores, max(1, rows) if whole else rows_per_slice)
    # A whole number of waves of tasks: 5 buckets on 2 cores would be 3 waves.
    buckets = 1 if whole else cores * max(1, -(-2 * rows // (ROWS_PER_PARTITION * cores)))
    # Each summary task costs a Python worker round trip: a small history needs one.
    parts = max(1, min(cores, -(-rows // ROWS_PER_PARTITION)))
    path, written, folder = str(history), str(anomalies), str(exchange)
    # A flag, not the IPC options: those cannot be pickled into the tasks.
    compressed = not sc.master.startswith("local") or rows > EXCHANGE_PLAIN_ROWS

    def map_slice(piece: tuple[list[int], int]) -> _Mapped:
        groups, first = piece
        try:
            file = pq.ParquetFile(path, read_dictionary=DICTIONARY_COLUMNS)
            table = file.read_row_groups(groups)
        except FileNotFoundError:
            raise RuntimeError(f"{_UNSEEN} {path}") from None
        except (OSError, pa.ArrowException) as e:
            raise RuntimeError(f"{_CORRUPT} {groups[0]}-{groups[-1]}: {e}") from None
        routed = route(with_positions(table, first), buckets)
        out = _Mapped(routed.share, {}, {b: work(t) for b, t in routed.buckets.items()})
        for kind, cut in ((_ROWS, routed.buckets), (_SERIES, routed.series)):
            for b, part in cut.items():
                # Named by slice: a retried map task writes the same file again.
                name = _write(f"{folder}/{kind}-{b}-{first}.arrow", part, compressed)
                out.files.setdefault(b, []).append((kind, name))
        return out

    def reduce_bucket(facts: Facts, b: int, files: list[tuple[str, str]]) -> list[list[str]]:
        # The summary parts' files of the bucket's rows, by part.
        bucket_s = bucket_seconds(facts.t0_ns, facts.t1_ns)
        found: list[pa.Table] = []
        series = [name for kind, name in files if kind == _SERIES]
        if series:
            found.append(series_rows(pa.concat_tables(map(_read, series)), facts.t0_ns, bucket_s))
        routed = [name for kind, name in files if kind == _ROWS]
        if routed:
            table = pa.concat_tables(map(_read, routed))
            step = partition_step(facts, per_kind)
            found.append(pa.Table.from_batches(step(iter(table.to_batches())), output_schema()))
        out: list[list[str]] = [[] for _ in range(parts)]
        if found:
            timed = with_buckets(pa.concat_tables(found), facts.t0_ns, bucket_s)
            for i, (part, cut) in enumerate(summary_parts(timed, parts)):
                out[part].append(_write(f"{folder}/{_PARTS}-{part}-{b}-{i}.arrow", cut, compressed))
        return out

    def summary(part: int, files: list[str]) -> PassFigures:
        return summarize([_read(f) for f in files], per_kind, written if part == 0 else None)

    def judge_whole(piece: tuple[list[int], int]) -> tuple[FactShare, PassFigures]:
        # The three steps of one slice, one bucket and one summary part, in a row.
        mapped = map_slice(piece)
        files = reduce_bucket(mapped.share.facts(), 0, mapped.files.get(0, []))
        return mapped.share, summary(0, files[0])

    try:
        if whole:
            judged = sc.parallelize(slices, 1).map(judge_whole).collect()
            share = FactShare()
            for piece_share, _ in judged:
                share.merge(piece_share)
            return PassResult(merged([f for _, f in judged]), share.t0 or 0, share.t1 or 0)
        # Three jobs, the driver between them: each hands the next the names of the files
        # it wrote, and the driver orders the reduce tasks. Through Spark's shuffles, the
        # two stage ends cost a job of nothing 0.3 s more on 2 cores.
        mapped = sc.parallelize(slices, len(slices)).map(map_slice).collect()
        share = FactShare()
        files: dict[int, list[tuple[str, str]]] = {}
        size: dict[int, int] = {}
        for m in mapped:
            share.merge(m.share)
            for b, names in m.files.items():
                files.setdefault(b, []).extend(names)
            for b, n in m.work.items():
                size[b] = size.get(b, 0) + n
        facts = share.facts()
        # The largest first (by work): Spark starts a stage's tasks in order, and the
        # last to start are then the shortest, so the cores finish close together. In
        # bucket order, the longest of the 5M pass's 8 buckets (half as long again as
        # the others) came sixth and kept one core busy alone for a second.
        order = sorted(files, key=lambda b: -size.get(b, 0))
        reduced = (
            sc.parallelize([(b, files[b]) for b in order], max(1, len(order)))
            .map(lambda bucket: reduce_bucket(facts, *bucket))
            .collect()
        )
        by_part = [(p, [f for r in reduced for f in r[p]]) for p in range(parts)]
        found = sc.parallelize(by_part, parts).map(lambda w: summary(*w)).collect()
    except Py4JJavaError as e:
        told = task_failure(str(e), history, meta.num_row_groups)
        if told is None:
            raise
        raise told from None
    return PassResult(merged(found), facts.t0_ns, facts.t1_ns)


def task_failure(message: str, history: Path, row_groups: int) -> Exception | None:
    """What to tell the user of a failed job whose error says `message`, when a task
    named the cause (an unreadable row group of `history`, which has `row_groups`, or a
    file it cannot find); None when no task did."""
    unseen = re.search(rf"{_UNSEEN} ([^\n]*)", message)
    if unseen is not None:
        return RuntimeError(
            f"a Spark worker cannot see {unseen[1]}: with a cluster, the run folder must "
            "be on storage that the driver and every worker see at the same path"
        )
    found = re.search(rf"{_CORRUPT} (\d+-\d+): ([^\n]*)", message)
    if found is None:
        return None
    return HistoryError(
        f"{history} cannot be read (corrupt); delete it and analyse again to rebuild "
        f"it from history/*.jsonl (row groups {found[1]} of {row_groups}: {found[2][:200]})"
    )


def _slices(meta: pq.FileMetaData, cores: int, rows: int) -> list[tuple[list[int], int]]:
    """The map tasks' slices of the history: consecutive row groups of about `rows`
    events, a whole number of waves of tasks, each with the position of
    its first event. Fewer, larger slices route in fewer DuckDB calls and cut each
    bucket into fewer, larger blobs (each blob repeats the schema and the dictionaries)."""
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    wanted = max(1, -(-sum(sizes) // rows))
    if wanted > 1:
        wanted = cores * -(-wanted // cores)
    count = min(len(sizes), wanted)
    slices, first = [], 0
    for k in range(count):
        groups = list(range(k * len(sizes) // count, (k + 1) * len(sizes) // count))
        slices.append((groups, first))
        first += sum(sizes[g] for g in groups)
    return slices


_IPC = pa.ipc.IpcWriteOptions(compression="lz4")
"""zstd's blobs are 40% smaller than lz4's but take twice the time to write and four
times to read. Through Spark's shuffle, uncompressed blobs (3x lz4's size) made the 5M
pass slower. Through files, uncompressed ones once ran as fast as lz4's in wall time,
but cost a third of the CPU (EXCHANGE_PLAIN_ROWS)."""
_PLAIN = pa.ipc.IpcWriteOptions()


def _write(path: str, table: pa.Table, compressed: bool = True) -> str:
    """Write `table` to the exchange file `path`, lz4-compressed if `compressed`, each
    route's rows in batches of their own if it has routes (sorted by route, as route()
    cuts them: driftlab.checkers.keyed.routes); returns `path`."""
    try:
        sink = pa.OSFile(path, "wb")
    except FileNotFoundError:  # the folder is on the driver's machine only
        raise RuntimeError(f"{_UNSEEN} {Path(path).parent}") from None
    options = _IPC if compressed else _PLAIN
    parts = runs(table) if ROUTE_COLUMN in table.column_names else [table]
    with sink, pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        for part in parts:
            writer.write_table(part, max_chunksize=CHUNK_ROWS)
    return path


def _read(path: str) -> pa.Table:
    """The table of the exchange file `path`."""
    try:
        return pa.ipc.open_stream(pa.memory_map(path)).read_all()
    except FileNotFoundError:
        raise RuntimeError(f"{_UNSEEN} {path}") from None
