"""The reader loads what was recorded, tolerates a kill's torn line, and names bad input."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from driftlab.harness.history import reader
from driftlab.harness.history.errors import HistoryError
from driftlab.harness.history.exitcodes import LabFailure
from driftlab.harness.history.reader import (
    HistoryInfo,
    arrow_schema,
    convert_to_parquet,
    load_history,
    parquet_info,
    read_history,
    read_parquet,
)
from driftlab.harness.history.recorder import Recorder
from driftlab.harness.history.schema import COLUMNS, INT_COLUMNS, SCHEMA_VERSION, Event, RunHeader

HEADER = RunHeader(run_id="r-read", scenario="unit", seed=3)


def _line(**fields: object) -> str:
    return json.dumps(fields, separators=(",", ":"))


def _header_line(schema: int = SCHEMA_VERSION, run_id: str = "r-read") -> str:
    extra = json.dumps({**asdict(HEADER), "schema": schema, "run_id": run_id})
    return _line(type="header", time=1, writer="w", seq=0, extra=extra)


def _segment(run: Path, lines: list[str], name: str = "w", tail: str = "\n") -> Path:
    seg = run / "history" / f"{name}.jsonl"
    seg.parent.mkdir(parents=True, exist_ok=True)
    seg.write_text("\n".join(lines) + tail)
    return seg


def _op(t: int, seq: int, **more: object) -> str:
    return _line(type="op", time=t, writer="w", seq=seq, process="c1", phase="invoke",
                 f="write", key="k", value=f"v{seq}", **more)  # fmt: skip


def _full_event(i: int) -> Event:
    """An event with every column set, so a round trip must keep every one."""
    values = {c: (i + 1000 * n if c in INT_COLUMNS else f"{c}-{i}") for n, c in enumerate(COLUMNS)}
    return Event(**{**values, "type": "msg", "extra": json.dumps({"i": i})})


def test_events_come_back_sorted_with_the_schema(tmp_path: Path) -> None:
    # Two writers whose times interleave, with a tie broken by writer then seq.
    _segment(tmp_path, [_header_line(), _op(10, 1), _op(30, 2), _op(30, 3)], name="a")
    _segment(tmp_path, [_header_line(), _op(20, 1), _op(30, 2)], name="b")
    history = read_history(tmp_path)
    table = history.table
    assert table.schema.equals(arrow_schema())
    assert table.column_names == list(COLUMNS)
    keys = [(r["time"], r["writer"], r["seq"]) for r in table.to_pylist()]
    assert keys == sorted(keys)
    assert history.info.events == 7 and history.info.segments == 2
    assert history.info.cut_short and history.info.header == HEADER
    # The history directory itself and the run directory read the same.
    assert load_history(tmp_path / "history").equals(table)


def test_missing_writer_and_seq_are_filled_from_the_segment(tmp_path: Path) -> None:
    _segment(tmp_path, [_header_line(), _line(type="mark", time=5, kind="end")], name="hand")
    rows = load_history(tmp_path).to_pylist()
    assert rows[1]["writer"] == "hand" and rows[1]["seq"] == 1
    assert read_history(tmp_path).info.complete


def test_truncated_last_line_is_dropped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torn = _op(40, 3)[:25]
    seg = _segment(tmp_path, [_header_line(), _op(10, 1), _op(20, 2), torn], tail="")
    with caplog.at_level(logging.WARNING, logger="driftlab.history"):
        history = read_history(tmp_path)
    assert history.info.events == 3
    assert history.info.dropped_partial_lines == 1
    assert f"{seg}: truncated last line (line 4) dropped" in caplog.text
    assert history.info.warnings == [m for m in caplog.messages if "truncated" in m]


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    _segment(tmp_path, [_header_line(), _op(10, 1)], tail="")
    history = read_history(tmp_path)
    assert history.info.events == 2 and history.info.dropped_partial_lines == 0


def test_a_line_longer_than_a_parse_block_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "BLOCK_SIZE", 1024)
    big = _line(type="mark", time=50, kind="note", extra=json.dumps({"blob": "x" * 5000}))
    _segment(tmp_path, [_header_line(), _op(10, 1), big, _op(60, 3)])
    table = load_history(tmp_path)
    assert table.num_rows == 4
    assert len(json.loads(table.column("extra")[2].as_py())["blob"]) == 5000


def test_empty_segment_is_skipped_with_a_warning(tmp_path: Path) -> None:
    _segment(tmp_path, [_header_line(), _op(10, 1)], name="a")
    (tmp_path / "history" / "b.jsonl").write_bytes(b"")
    _segment(tmp_path, [_header_line()[:30]], name="c", tail="")  # killed mid-header
    history = read_history(tmp_path)
    assert history.info.segments == 1 and history.info.empty_segments == 2
    assert history.info.dropped_partial_lines == 1
    assert "b.jsonl: empty segment skipped" in history.info.warnings[0]
    assert "c.jsonl: truncated last line (line 1) dropped" in history.info.warnings[1]


def test_a_single_segment_file_can_be_read(tmp_path: Path) -> None:
    seg = _segment(tmp_path, [_header_line(), _op(10, 1)], name="a")
    _segment(tmp_path, [_header_line(), _op(20, 1)], name="b")
    assert load_history(seg).column("time").to_pylist() == [1, 10]


BAD_LINES = {
    "malformed": ('{"type":"op","time":', "line 3: not valid JSON"),
    "unknown type": (_line(type="teleport", time=5), "line 3: unknown event type 'teleport'"),
    "time as string": (_line(type="op", time="soon"), "line 3: column 'time' must be a 64-bit"),
    "float int": (_line(type="op", time=5, offset=1.5), "line 3: column 'offset' must be a 64"),
    "key as number": (_line(type="op", time=5, key=7), "line 3: column 'key' must be a string"),
    "missing type": (_line(time=5, key="k"), "line 3: missing 'type'"),
    "missing time": (_line(type="op", key="k"), "line 3: missing 'time'"),
    "null type": (_line(type=None, time=5), "line 3: missing 'type'"),
    "unknown column": (_line(type="op", time=5, colour="red"), "line 3: unknown column(s) colour"),
    "not an object": ("[1, 2]", "line 3: expected a JSON object"),
    "int64 overflow": (_line(type="op", time=2**64), "line 3: column 'time' must be a 64-bit"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_line_names_file_and_line(tmp_path: Path, case: str) -> None:
    bad, message = BAD_LINES[case]
    seg = _segment(tmp_path, [_header_line(), _op(10, 1), bad, _op(30, 3)])
    with pytest.raises(HistoryError) as err:
        load_history(tmp_path)
    assert f"{seg}: {message}" in str(err.value)
    assert err.value.__cause__ is None  # no pyarrow traceback chained for the user


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    seg = _segment(tmp_path, [_header_line(schema=SCHEMA_VERSION + 1), _op(10, 1)])
    with pytest.raises(HistoryError, match="upgrade driftlab") as err:
        load_history(tmp_path)
    assert f"{seg}: line 1: written with history schema {SCHEMA_VERSION + 1}" in str(err.value)


def test_segment_without_header_is_refused(tmp_path: Path) -> None:
    seg = _segment(tmp_path, [_op(10, 1)])
    with pytest.raises(HistoryError, match=f"{seg}: line 1: a segment must start with a 'header'"):
        load_history(tmp_path)


def test_segments_of_two_runs_are_refused(tmp_path: Path) -> None:
    _segment(tmp_path, [_header_line(run_id="one")], name="a")
    _segment(tmp_path, [_header_line(run_id="two")], name="b")
    with pytest.raises(HistoryError, match=r"b\.jsonl: belongs to run 'two'"):
        load_history(tmp_path)


def test_missing_or_empty_history_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="no such run or history directory"):
        load_history(tmp_path / "nope")
    with pytest.raises(HistoryError, match="no history here"):
        load_history(tmp_path)
    (tmp_path / "history").mkdir()
    with pytest.raises(HistoryError, match=r"history: no \*\.jsonl segments; re-run"):
        load_history(tmp_path)
    (tmp_path / "history" / "a.jsonl").write_bytes(b"\n")
    with pytest.raises(HistoryError, match="every segment is empty"):
        load_history(tmp_path)
    with pytest.raises(HistoryError, match="not a run directory"):
        convert_to_parquet(tmp_path / "nope")


@pytest.fixture()
def recorded_run(tmp_path: Path) -> Path:
    """A run recorded by the real recorder: every column set on 300 events, then END."""
    with Recorder(tmp_path, HEADER, role="client") as rec:
        for i in range(300):
            rec.record(_full_event(i))
        rec.end()
    return tmp_path


def test_parquet_round_trip_keeps_every_column_and_type(recorded_run: Path) -> None:
    info = convert_to_parquet(recorded_run)
    assert info.events == 302 and info.complete
    parquet = recorded_run / "history.parquet"
    assert pq.read_schema(parquet).remove_metadata().equals(arrow_schema())
    from_parquet = read_parquet(parquet)
    from_segments = load_history(recorded_run)
    assert from_parquet.table.equals(from_segments)
    assert from_parquet.info == info == parquet_info(parquet)
    msgs = [r for r in from_parquet.table.to_pylist() if r["type"] == "msg"]
    assert len(msgs) == 300
    for r in msgs:
        i = json.loads(r["extra"])["i"]
        expected = asdict(_full_event(i))
        assert {c: r[c] for c in COLUMNS if c not in ("time", "writer", "seq")} == {
            c: expected[c] for c in COLUMNS if c not in ("time", "writer", "seq")
        }
        assert r["time"] == expected["time"]  # a given time is kept


def test_conversion_is_skipped_when_up_to_date(recorded_run: Path) -> None:
    parquet = recorded_run / "history.parquet"
    convert_to_parquet(recorded_run)
    first = parquet.stat().st_mtime_ns
    convert_to_parquet(recorded_run)
    assert parquet.stat().st_mtime_ns == first
    # A new segment (a late writer) makes it stale: converted again, with its events.
    with Recorder(recorded_run, role="late") as rec:
        rec.mark("consumer-done", consumer="g")
    info = convert_to_parquet(recorded_run)
    assert info.events == 304 and info.segments == 2
    assert parquet.stat().st_mtime_ns != first
    assert read_parquet(parquet).info == info


def test_unreadable_parquet_is_reconverted_by_convert(recorded_run: Path) -> None:
    parquet = recorded_run / "history.parquet"
    parquet.write_bytes(b"not parquet at all")
    assert convert_to_parquet(recorded_run).events == 302
    assert read_parquet(parquet).table.num_rows == 302


def test_unwritable_parquet_names_the_fix(recorded_run: Path) -> None:
    blocker = recorded_run / "history.parquet"
    blocker.mkdir()  # a directory in the way: the rename cannot replace it
    (blocker / "x").touch()
    with pytest.raises(LabFailure, match=r"history\.parquet: cannot write it .*disk space"):
        convert_to_parquet(recorded_run)
    assert not list(recorded_run.glob(".history.parquet.*"))  # no temporary file left


def test_corrupt_parquet_footer_names_the_fix(recorded_run: Path) -> None:
    convert_to_parquet(recorded_run)
    parquet = recorded_run / "history.parquet"
    data = parquet.read_bytes()
    parquet.write_bytes(data[: len(data) // 2])
    with pytest.raises(HistoryError) as err:
        load_history(parquet)
    assert f"{parquet}: not a readable Parquet file" in str(err.value)
    assert "delete history.parquet to reconvert" in str(err.value)


def test_corrupt_parquet_row_group_is_named(
    recorded_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "ROW_GROUP_SIZE", 100)  # four row groups of 302 events
    convert_to_parquet(recorded_run)
    parquet = recorded_run / "history.parquet"
    column = pq.ParquetFile(parquet).metadata.row_group(1).column(0)
    start = column.dictionary_page_offset or column.data_page_offset
    data = bytearray(parquet.read_bytes())
    data[start : start + column.total_compressed_size] = b"\xff" * column.total_compressed_size
    parquet.write_bytes(bytes(data))
    with pytest.raises(HistoryError) as err:
        read_parquet(parquet)
    assert f"{parquet}: row group 1 of 4 is corrupt (" in str(err.value)
    assert str(err.value).isprintable()
    assert "delete history.parquet to reconvert" in str(err.value)


def test_parquet_of_another_shape_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "history.parquet"
    pq.write_table(pa.table({"type": ["op"], "time": [1]}), other)
    with pytest.raises(HistoryError, match="not those of history schema"):
        load_history(tmp_path)


def _parquet_with(path: Path, types: list[str | None], metadata: bytes) -> None:
    schema = pa.schema([f.with_nullable(True) for f in arrow_schema()])
    columns = {f.name: pa.array([None] * len(types), f.type) for f in schema}
    columns.update(type=pa.array(types, pa.string()), time=pa.array([1] * len(types)))
    table = pa.table(columns, schema=schema)
    pq.write_table(table.replace_schema_metadata({reader.METADATA_KEY: metadata}), path)


def test_parquet_with_bad_rows_or_metadata_is_refused(tmp_path: Path) -> None:
    parquet = tmp_path / "history.parquet"
    _parquet_with(parquet, ["op", None], HistoryInfo(events=2).to_json().encode())
    with pytest.raises(HistoryError, match="events without type or time"):
        load_history(parquet)
    _parquet_with(parquet, ["op", "teleport"], HistoryInfo(events=2).to_json().encode())
    with pytest.raises(HistoryError, match=r"of an unknown type; delete history\.parquet"):
        load_history(parquet)
    _parquet_with(parquet, ["op"], b"{not json")
    with pytest.raises(HistoryError, match="history metadata is unreadable"):
        parquet_info(parquet)
    _parquet_with(parquet, ["op"], HistoryInfo(events=1).to_json().encode())
    assert load_history(tmp_path).column("type").to_pylist() == ["op"]
