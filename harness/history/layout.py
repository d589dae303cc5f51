"""Where a history lives in a run directory (a light module: recorders import it)."""

from __future__ import annotations

HISTORY_DIR = "history"
"""`RUN_DIR/history/` holds one JSON-lines segment per writer process."""

SEGMENT_SUFFIX = ".jsonl"
"""A segment is `RUN_DIR/history/<writer>.jsonl`."""

PARQUET_NAME = "history.parquet"
"""`RUN_DIR/history.parquet`: all segments converted, sorted, for analysis."""
