"""Read a recorded history back: JSON-lines segments or history.parquet, validated.

The segments in `RUN_DIR/history/*.jsonl` are the source of truth; `history.parquet` is
derived from them by `convert_to_parquet` and carries a fingerprint of the segments it
came from, so an up-to-date file is not converted again.

Reading is fast (pyarrow's JSON reader with the explicit schema, one segment at a time).
Only when that fails, or the parsed table breaks a rule, is the segment scanned line by
line in Python, to raise a `HistoryError` naming the file, the line and the fix.
"""

from __future__ import annotations

import io
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from driftlab.harness.history.errors import HistoryError
from driftlab.harness.history.exitcodes import LabFailure
from driftlab.harness.history.layout import HISTORY_DIR, PARQUET_NAME, SEGMENT_SUFFIX
from driftlab.harness.history.schema import (
    COLUMNS,
    INT_COLUMNS,
    SCHEMA_VERSION,
    EventType,
    Mark,
    RunHeader,
)
from driftlab.harness.history.segment import (
    RERUN,
    check_header,
    drop_partial_tail,
    scan,
    valid_table,
)

log = logging.getLogger("driftlab.history")

METADATA_KEY = b"driftlab.history"
SEGMENTS_KEY = b"driftlab.segments"
SORT_KEYS = [("time", "ascending"), ("writer", "ascending"), ("seq", "ascending")]
# Row groups small enough that a corrupt one loses little and is named precisely.
ROW_GROUP_SIZE = 128 * 1024
# Blocks of the JSON reader, parsed in parallel; a longer line needs a second attempt.
BLOCK_SIZE = 4 << 20


def arrow_schema() -> pa.Schema:
    """The Arrow schema of a history table: int64 and string columns in schema order."""
    return pa.schema(
        [
            pa.field(c, pa.int64() if c in INT_COLUMNS else pa.string(), nullable=c != "type")
            for c in COLUMNS
        ]
    )


_SCHEMA = arrow_schema()
# Nullable throughout for parsing: a missing `type` must reach our own check and message.
_PARSE_SCHEMA = pa.schema([f.with_nullable(True) for f in _SCHEMA])


@dataclass(slots=True)
class HistoryInfo:
    """What reading a history found, beside its events."""

    events: int = 0
    segments: int = 0
    complete: bool = False  # an END mark exists: the run closed its history
    dropped_partial_lines: int = 0  # truncated last lines (a SIGKILL mid-write)
    empty_segments: int = 0  # segments with no bytes (a writer killed before its header)
    header: RunHeader | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def cut_short(self) -> bool:
        """The run did not close its history (no END mark): it was killed or crashed."""
        return not self.complete

    def to_json(self) -> str:
        """The info as a JSON object (stored in the Parquet file's metadata)."""
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> HistoryInfo:
        """Inverse of `to_json`."""
        data = json.loads(text)
        header = data.pop("header", None)
        return cls(**data, header=RunHeader(**header) if header else None)


@dataclass(slots=True)
class History:
    """A loaded history: the events (sorted by time, writer, seq) and what was found."""

    table: pa.Table
    info: HistoryInfo


def load_history(path: str | os.PathLike[str]) -> pa.Table:
    """The events of a history as an Arrow table with exactly the schema's columns.

    `path` is a run directory, its `history/` directory or a `history.parquet` file. A
    run directory is read from its segments (the source of truth), or from its
    history.parquet when it has no segments. Raises HistoryError on any bad input.
    """
    return read_history(path).table


def read_history(path: str | os.PathLike[str]) -> History:
    """Like `load_history`, also returning the HistoryInfo (completeness, warnings)."""
    p = Path(path)
    if p.is_file() and p.suffix == ".parquet":
        return read_parquet(p)
    if not p.exists():
        raise HistoryError(f"{p}: no such run or history directory; check the path")
    if p.is_file() and p.suffix == SEGMENT_SUFFIX:
        return _read_segments(p, [p])
    hist_dir = _history_dir(p)
    if hist_dir is None:
        parquet = p / PARQUET_NAME
        if parquet.is_file():
            return read_parquet(parquet)
        raise HistoryError(
            f"{p}: no history here (neither {HISTORY_DIR}/ nor {PARQUET_NAME}); pass a run "
            f"directory such as runs/latest, or {RERUN}"
        )
    return _read_segments(hist_dir, _segments(hist_dir))


def convert_to_parquet(run_dir: str | os.PathLike[str], *, force: bool = False) -> HistoryInfo:
    """Write RUN_DIR/history.parquet from the segments, unless it is already up to date.

    Up to date means the file records the same segments (names, sizes, mtimes) as are
    present now. A run directory holding only history.parquet is validated, not
    rewritten. Returns the HistoryInfo of the history.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise HistoryError(f"{run}: not a run directory; pass e.g. runs/latest")
    dest = run / PARQUET_NAME
    hist_dir = _history_dir(run)
    if hist_dir is None:
        if dest.is_file():
            return parquet_info(dest)
        raise HistoryError(f"{run}: no {HISTORY_DIR}/ directory with segments; {RERUN}")
    segments = _segments(hist_dir)
    fingerprint = _fingerprint(segments)
    if not force and dest.is_file():
        try:
            meta = pq.read_schema(dest).metadata or {}
            if meta.get(SEGMENTS_KEY) == fingerprint.encode():
                return HistoryInfo.from_json(meta[METADATA_KEY])
        except (pa.ArrowException, OSError, ValueError, TypeError, KeyError) as e:
            log.warning("%s is unreadable (%s); converting again", dest, _first_line(e))
    history = _read_segments(hist_dir, segments)
    table = history.table.replace_schema_metadata(
        {METADATA_KEY: history.info.to_json(), SEGMENTS_KEY: fingerprint}
    )
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp, row_group_size=ROW_GROUP_SIZE, compression="zstd")
        os.replace(tmp, dest)
    except (pa.ArrowException, OSError) as e:
        # The history is sound; the disk or the folder failed (exit 3, not bad input).
        raise LabFailure(
            f"{dest}: cannot write it ({_first_line(e)}); check the disk space and the run "
            "directory's permissions"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
    return history.info


def read_parquet(path: str | os.PathLike[str]) -> History:
    """Read a history.parquet, row group by row group, naming any corrupt one."""
    p = Path(path)
    pf = _open_parquet(p)
    info = _info_from_parquet(p, pf)
    tables = []
    for i in range(pf.num_row_groups):
        try:
            tables.append(pf.read_row_group(i))
        except (pa.ArrowException, OSError) as e:
            raise HistoryError(
                f"{p}: row group {i} of {pf.num_row_groups} is corrupt ({_first_line(e)}); "
                f"delete {p.name} to reconvert it from the segments"
            ) from None
    table = pa.concat_tables(tables) if tables else _SCHEMA.empty_table()
    if not valid_table(table):
        raise HistoryError(
            f"{p}: events without type or time, or of an unknown type; delete {p.name} to "
            "reconvert it from the segments"
        )
    return History(table.cast(_SCHEMA), info)


def parquet_info(path: str | os.PathLike[str]) -> HistoryInfo:
    """Check a history.parquet's footer and schema (cheap) and return its HistoryInfo."""
    p = Path(path)
    return _info_from_parquet(p, _open_parquet(p))


# --- segments ---------------------------------------------------------------------------


def _history_dir(p: Path) -> Path | None:
    """The directory holding the segments: `p/history`, or `p` itself if it holds them."""
    if (p / HISTORY_DIR).is_dir():
        return p / HISTORY_DIR
    if p.is_dir() and any(p.glob(f"*{SEGMENT_SUFFIX}")):
        return p
    return None


def _segments(hist_dir: Path) -> list[Path]:
    return sorted(hist_dir.glob(f"*{SEGMENT_SUFFIX}"))


def _fingerprint(segments: list[Path]) -> str:
    parts = []
    for seg in segments:
        st = seg.stat()
        parts.append(f"{seg.name}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def _read_segments(where: Path, segments: list[Path]) -> History:
    if not segments:
        raise HistoryError(f"{where}: no *{SEGMENT_SUFFIX} segments; {RERUN}")
    info = HistoryInfo()
    tables = []
    for seg in segments:
        table = _read_segment(seg, info)
        if table is not None:
            tables.append(table)
            info.segments += 1
    if not tables:
        raise HistoryError(f"{where}: every segment is empty, no events; {RERUN}")
    table = pa.concat_tables(tables).sort_by(SORT_KEYS)
    info.events = table.num_rows
    info.complete = _has_end_mark(table)
    for w in info.warnings:
        log.warning("%s", w)
    return History(table.cast(_SCHEMA), info)


def _read_segment(seg: Path, info: HistoryInfo) -> pa.Table | None:
    data = seg.read_bytes()
    if not data or data.isspace():
        info.empty_segments += 1
        info.warnings.append(f"{seg}: empty segment skipped (its writer died before writing)")
        return None
    data, dropped = drop_partial_tail(data)
    if dropped:
        info.dropped_partial_lines += 1
        line_no = data.count(b"\n") + 1
        info.warnings.append(
            f"{seg}: truncated last line (line {line_no}) dropped; its writer was killed mid-write"
        )
        if data.isspace() or not data:  # killed while writing its header
            info.empty_segments += 1
            return None
    header = check_header(seg, data)
    if info.header is None:
        info.header = header
    elif header.run_id != info.header.run_id:
        raise HistoryError(
            f"{seg}: belongs to run {header.run_id!r}, the other segments to "
            f"{info.header.run_id!r}; remove the segments that do not belong to this run"
        )
    try:
        table = _parse(data, BLOCK_SIZE)
    except (pa.ArrowException, OSError) as e:
        scan(seg, data)  # raises the precise error
        try:  # every line is fine: one is longer than a block, so read in one block
            table = _parse(data, len(data) + 1)
        except (pa.ArrowException, OSError):
            raise HistoryError(f"{seg}: unreadable ({_first_line(e)}); {RERUN}") from None
    if not valid_table(table):
        scan(seg, data)
        raise HistoryError(f"{seg}: events break the schema rules; {RERUN}")
    return _fill_identity(table.select(list(COLUMNS)), seg)


def _parse(data: bytes, block_size: int) -> pa.Table:
    return pa_json.read_json(
        io.BytesIO(data),
        read_options=pa_json.ReadOptions(block_size=block_size),
        parse_options=pa_json.ParseOptions(
            explicit_schema=_PARSE_SCHEMA, unexpected_field_behavior="error"
        ),
    )


def _fill_identity(table: pa.Table, seg: Path) -> pa.Table:
    """Events written by hand may lack writer/seq: the segment and line order stand in."""
    writer, seq = table.column("writer"), table.column("seq")
    if writer.null_count:
        table = table.set_column(COLUMNS.index("writer"), "writer", pc.fill_null(writer, seg.stem))
    if seq.null_count:
        order = pa.array(range(table.num_rows), pa.int64())
        table = table.set_column(COLUMNS.index("seq"), "seq", pc.coalesce(seq, order))
    return table


def _has_end_mark(table: pa.Table) -> bool:
    is_end = pc.and_(
        pc.equal(table.column("type"), EventType.MARK.value),
        pc.equal(table.column("kind"), Mark.END.value),
    )
    return bool(pc.any(is_end).as_py())


# --- parquet ----------------------------------------------------------------------------


def _open_parquet(p: Path) -> pq.ParquetFile:
    if not p.is_file():
        raise HistoryError(f"{p}: no such file; run `driftlab analyze` on the run to convert it")
    try:
        pf = pq.ParquetFile(p)
    except (pa.ArrowException, OSError) as e:
        raise HistoryError(
            f"{p}: not a readable Parquet file ({_first_line(e)}); delete {p.name} to "
            "reconvert it from the segments"
        ) from None
    schema = pf.schema_arrow
    wanted = [(f.name, f.type) for f in _SCHEMA]
    if [(f.name, f.type) for f in schema] != wanted:
        raise HistoryError(
            f"{p}: its columns are not those of history schema {SCHEMA_VERSION}; delete "
            f"{p.name} to reconvert it from the segments"
        )
    return pf


def _info_from_parquet(p: Path, pf: pq.ParquetFile) -> HistoryInfo:
    meta = pf.schema_arrow.metadata or {}
    if METADATA_KEY not in meta:
        raise HistoryError(
            f"{p}: not written by driftlab (no history metadata); delete {p.name} to "
            "reconvert it from the segments"
        )
    try:
        return HistoryInfo.from_json(meta[METADATA_KEY])
    except (ValueError, TypeError, AttributeError) as e:
        raise HistoryError(
            f"{p}: its history metadata is unreadable ({e}); delete {p.name} to reconvert "
            "it from the segments"
        ) from None


def _first_line(e: BaseException) -> str:
    """The gist of a library error, printable, for a one-line message."""
    text = str(e).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    return "".join(ch if ch.isprintable() else "?" for ch in first)
