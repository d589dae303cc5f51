"""What a segment line must be: the rules the reader checks when it reads a segment,
and the recorder keeps when it writes one, so that a history stays readable.

A segment starts with a `header` event; every line is one JSON object of the schema's
columns (docs/history.md), strings or 64-bit integers; a last line cut short by a kill
is dropped, not an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from driftlab.harness.history.errors import HistoryError
from driftlab.harness.history.schema import (
    COLUMNS,
    INT_COLUMNS,
    REQUIRED_COLUMNS,
    SCHEMA_VERSION,
    EventType,
    RunHeader,
)

EVENT_TYPES = frozenset(t.value for t in EventType)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
RERUN = "re-run the scenario to record a new history"
"""The fix named by every message about a damaged history."""


def drop_partial_tail(data: bytes) -> tuple[bytes, bool]:
    """Drop a last line cut short by a kill; a complete object without newline stays."""
    if data.endswith(b"\n"):
        return data, False
    cut = data.rfind(b"\n") + 1
    tail = data[cut:]
    try:
        json.loads(tail)
    except ValueError:
        return data[:cut], True
    return data + b"\n", False


def check_header(seg: Path, data: bytes) -> RunHeader:
    """The segment's run header; rejects a missing header or a newer schema version."""
    start = len(data) - len(data.lstrip(b"\n"))
    line = data[start:].split(b"\n", 1)[0]
    where = f"{seg}: line {start + 1}"  # only empty lines precede it
    try:
        first = json.loads(line)
    except ValueError as e:
        raise HistoryError(f"{where}: not valid JSON ({e}); {RERUN}") from None
    if not isinstance(first, dict) or first.get("type") != EventType.HEADER:
        raise HistoryError(
            f"{where}: a segment must start with a 'header' event, found "
            f"{first.get('type') if isinstance(first, dict) else first!r}; segments are "
            "written by driftlab.harness.history.recorder.Recorder"
        )
    try:
        raw = json.loads(first["extra"])
        schema = raw.get("schema", SCHEMA_VERSION)
        if isinstance(schema, int) and schema > SCHEMA_VERSION:
            raise HistoryError(
                f"{where}: written with history schema {schema}, this driftlab reads "
                f"schema {SCHEMA_VERSION} and older; upgrade driftlab to read it"
            )
        return RunHeader(**raw)
    except HistoryError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise HistoryError(
            f"{where}: the header's extra is not a run header "
            f"(run_id, scenario, seed, schema, params): {e}; {RERUN}"
        ) from None


def valid_table(table: pa.Table) -> bool:
    """The rules a parsed table must meet (the scan below explains any breach)."""
    types = table.column("type")
    return (
        types.null_count == 0
        and table.column("time").null_count == 0
        and set(pc.unique(types).to_pylist()) <= EVENT_TYPES
    )


def scan(seg: Path, data: bytes) -> None:
    """Check every line in Python; raise a HistoryError for the first bad one."""
    for n, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        where = f"{seg}: line {n}"
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise HistoryError(
                f"{where}: not valid JSON ({e}); the segment is damaged, {RERUN}"
            ) from None
        if not isinstance(obj, dict):
            raise HistoryError(f"{where}: expected a JSON object, found {type(obj).__name__}")
        check_event(where, obj)


def check_event(where: str, obj: dict[str, Any]) -> None:
    """Raise a HistoryError at `where` for the first rule `obj` breaks."""
    unknown = sorted(set(obj) - set(COLUMNS))
    if unknown:
        raise HistoryError(
            f"{where}: unknown column(s) {', '.join(unknown)}; the columns of history "
            f"schema {SCHEMA_VERSION} are listed in docs/history.md"
        )
    for col in sorted(REQUIRED_COLUMNS):
        if obj.get(col) is None:
            raise HistoryError(f"{where}: missing '{col}', which every event must have")
    if obj["type"] not in EVENT_TYPES:
        raise HistoryError(
            f"{where}: unknown event type {obj['type']!r}; expected one of "
            f"{', '.join(sorted(EVENT_TYPES))}"
        )
    for col, value in obj.items():
        if value is None:
            continue
        if col in INT_COLUMNS:
            ok = type(value) is int and INT64_MIN <= value <= INT64_MAX
            expected = "a 64-bit integer"
        else:
            ok = isinstance(value, str)
            expected = "a string"
        if not ok:
            raise HistoryError(f"{where}: column '{col}' must be {expected}, found {value!r}")
