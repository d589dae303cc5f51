"""One writer's segment of a history: durable, append-only JSON lines.

Every process (and every forked child) writes its own segment
`RUN_DIR/history/<writer>.jsonl`, so writers never contend for a file; threads of one
process share its writer through a lock. Events are buffered and written in batches
(`batch_size` events, or every `flush_interval` seconds by a background thread), and
each written batch is fsynced by that thread. Once `write` returns the bytes live in the
kernel's page cache, which a killed process cannot take back: SIGKILL loses at most the
events still in the buffer, fewer than one batch. A machine crash can also lose what was
written but not yet fsynced (at most one flush interval, typically one fsync).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from driftlab.harness.history.errors import HistoryError
from driftlab.harness.history.layout import HISTORY_DIR, SEGMENT_SUFFIX
from driftlab.harness.history.schema import COLUMNS, INT_COLUMNS, EventType, RunHeader
from driftlab.harness.history.segment import INT64_MAX, INT64_MIN

_ROLE = re.compile(r"[A-Za-z0-9_.]+")
_INT_COLUMNS = frozenset(INT_COLUMNS)
_STR_COLUMNS = frozenset(COLUMNS) - _INT_COLUMNS

# Every open writer, so that fork handlers and exit can reach them.
_live: weakref.WeakSet[SegmentWriter] = weakref.WeakSet()


class SegmentWriter:
    """Appends events (column dicts) to one writer's own segment of a run.

    A forked child gets a new writer and segment automatically. Close it so the last
    batch is written: a forked child leaving through `os._exit`, as multiprocessing's
    children do, must call `close()` first. `Recorder` builds on it with the typed
    events of the schema.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        header: RunHeader | None = None,
        *,
        role: str = "harness",
        batch_size: int = 256,
        flush_interval: float = 0.2,
    ) -> None:
        """Open a new segment in `run_dir/history/` and write its HEADER event.

        `header` identifies the run; a process joining a run already started may leave
        it out to copy the header of an existing segment. `role` names the writer
        (`client`, `consumer`, `nemesis`, ...) in the segment's file name.
        """
        if not _ROLE.fullmatch(role):
            raise ValueError(f"role {role!r} must be letters, digits, '_' or '.'")
        if batch_size < 1 or flush_interval <= 0:
            raise ValueError("batch_size must be >= 1 and flush_interval > 0")
        self.history_dir = Path(run_dir) / HISTORY_DIR
        self.history_dir.mkdir(parents=True, exist_ok=True)
        self.header = header if header is not None else _existing_header(self.history_dir)
        self.role = role
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self._reset()
        with self._lock:
            self._open_locked()
        _live.add(self)

    # --- lifecycle ---------------------------------------------------------------------

    def _reset(self) -> None:
        """A new writer with fresh locks and buffer; its segment opens on first use."""
        self._lock = threading.Lock()  # buffer, seq, writes to the fd
        self._sync_lock = threading.Lock()  # fsync and close of the fd
        self._wake = threading.Event()
        self._buf = bytearray()  # encoded lines not yet written
        self._buffered = 0  # events in _buf
        self._seq = 0
        self._dirty = False
        self._closed = False
        self._fd = -1
        self.opened_ns = 0  # the time of the segment's header, once it is open
        self._flusher: threading.Thread | None = None
        # The write error (a full disk) that ended this segment early; see _write_locked.
        self.failure: OSError | None = None
        self.writer = f"{self.role}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.path = self.history_dir / f"{self.writer}{SEGMENT_SUFFIX}"

    def _open_locked(self) -> None:
        """Create the segment, make its header durable, start the flusher (holds `_lock`)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
        self._fd = os.open(self.path, flags, 0o644)
        # The segment's first event: the time a report counts "seconds into the run" from.
        self.opened_ns = time.time_ns()
        self._append_locked(
            {
                "type": EventType.HEADER.value,
                "time": self.opened_ns,
                "extra": json_text(asdict(self.header)),
            }
        )
        self._write_locked()
        if self.failure is not None:
            raise self.failure  # not even the header: there is no history to keep
        os.fsync(self._fd)
        _fsync_dir(self.history_dir)  # the new file's name survives a machine crash too
        self._dirty = False
        self._flusher = threading.Thread(
            target=self._run_flusher, name=f"history-flusher-{self.writer}", daemon=True
        )
        self._flusher.start()

    def flush(self) -> None:
        """Write the buffered events and fsync them before returning."""
        with self._sync_lock:
            with self._lock:
                if self._closed or self._fd < 0:
                    return
                self._write_locked()
                self._dirty = False
            self._sync(os.fdatasync)

    def close(self) -> None:
        """Write and fsync what is buffered, then close the segment (idempotent)."""
        with self._sync_lock:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                if self._fd >= 0:
                    self._write_locked()
            if self._fd >= 0:
                self._sync(os.fsync)
                os.close(self._fd)
        self._wake.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join()
        _live.discard(self)

    # --- internals ---------------------------------------------------------------------

    def _emit(self, event: dict[str, Any]) -> None:
        _check_columns(event)
        with self._lock:
            if self._closed:
                raise HistoryError(f"{self.path}: the recorder is closed; open a new one")
            if self._fd < 0:  # a forked child's first event
                self._open_locked()
            self._append_locked(event)
            if self._buffered >= self.batch_size:
                self._write_locked()
                self._wake.set()

    def _append_locked(self, event: dict[str, Any]) -> None:
        # Time is taken under the lock so that a writer's times follow its seq.
        event.setdefault("time", time.time_ns())
        event["writer"] = self.writer
        event["seq"] = self._seq
        self._seq += 1
        # One growing bytearray, not a list of small objects: the per-event allocations
        # it avoids cost more in malloc's system calls than the encoding itself.
        self._buf += orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE)
        self._buffered += 1

    def _write_locked(self) -> None:
        """Hand the buffer to the kernel (caller holds `_lock`).

        A write that fails (a full disk, a file system remounted read-only) ends the
        segment there: `failure` keeps the error, and later events are discarded rather
        than raised in every client thread and the flusher. What was written stays
        readable (a reader drops a partial last line); the runner sees `failure`, stops
        the run and says so.
        """
        if not self._buffered:
            return
        try:
            if self.failure is None:
                written = os.write(self._fd, self._buf)
                if written < len(self._buf):  # a short write (a full disk): finish it
                    with memoryview(self._buf) as view:
                        while written < len(view):
                            written += os.write(self._fd, view[written:])
                self._dirty = True
        except OSError as exc:
            exc.filename = exc.filename or str(self.path)  # os.write names no file
            self.failure = exc
        finally:
            self._buf.clear()
            self._buffered = 0

    def _sync(self, sync: Callable[[int], None]) -> None:
        """fsync or fdatasync the segment; a failure ends it as a failed write does."""
        if self.failure is not None:
            return
        try:
            sync(self._fd)
        except OSError as exc:
            exc.filename = exc.filename or str(self.path)
            self.failure = exc

    def _run_flusher(self) -> None:
        while True:
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            with self._sync_lock:
                with self._lock:
                    if self._closed:
                        return
                    self._write_locked()
                    dirty, self._dirty = self._dirty, False
                if dirty:
                    self._sync(os.fdatasync)

    def _before_fork(self) -> None:
        self._sync_lock.acquire()
        self._lock.acquire()

    def _after_fork_parent(self) -> None:
        self._lock.release()
        self._sync_lock.release()

    def _after_fork_child(self) -> None:
        """A new writer for the child (the parent keeps, and writes, its own buffer).

        Its segment is created by its first event, so a child that only execs or exits
        leaves no file behind.
        """
        if self._closed:
            return
        inherited = self._fd
        self._reset()
        os.close(inherited)


def _check_columns(event: dict[str, Any]) -> None:
    """Refuse now what the reader would refuse later: a history must stay readable."""
    for col, value in event.items():
        if col in _STR_COLUMNS:
            if not isinstance(value, str):
                raise TypeError(f"event column {col!r} must be a str, got {value!r}")
        elif col in _INT_COLUMNS:
            if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
                raise TypeError(f"event column {col!r} must be a 64-bit int, got {value!r}")
        else:
            raise ValueError(f"unknown event column {col!r}; the columns are in docs/history.md")


def json_text(obj: Any) -> str:
    """A JSON object as the text of the `extra` column (keys sorted: stable output)."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()


def _existing_header(history_dir: Path) -> RunHeader:
    for seg in sorted(history_dir.glob(f"*{SEGMENT_SUFFIX}")):
        with seg.open("rb") as fh:
            first = fh.readline()
        try:
            event = json.loads(first)
            if event.get("type") == EventType.HEADER:
                return RunHeader(**json.loads(event["extra"]))
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
    raise HistoryError(
        f"{history_dir}: no segment with a run header to join; pass header=RunHeader(...) "
        "to the first Recorder of the run"
    )


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# The recorders whose locks the forking thread holds, released after the fork.
_forking: list[SegmentWriter] = []


def _before_fork() -> None:
    _forking[:] = list(_live)
    for r in _forking:
        r._before_fork()


def _after_fork_parent() -> None:
    for r in _forking:
        r._after_fork_parent()
    _forking.clear()


def _after_fork_child() -> None:
    for r in _forking:
        r._after_fork_child()
    _forking.clear()


def _close_all() -> None:
    for r in list(_live):
        r.close()


os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_parent, after_in_child=_after_fork_child
)
atexit.register(_close_all)
