"""Values unique within a run and traceable to the process that made them.

A checker can only tell which write a store holds if every written value is unique, so
workloads take their values from a `UniqueValues`: `<prefix>-<counter>`, where the
prefix names the client process. A forked child continues with its own prefix
(`<prefix>@<child pid>`) so parent and child never hand out the same value.
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
import weakref

_live: weakref.WeakSet[UniqueValues] = weakref.WeakSet()


class UniqueValues:
    """A thread-safe generator of values `<prefix>-1`, `<prefix>-2`, ...

    Uniqueness across processes rests on distinct prefixes: give each client its own
    (its process name), or leave it out for `p<pid>.<random>`.
    """

    def __init__(self, prefix: str | None = None) -> None:
        """Start a sequence; `prefix` must not contain '-' so a value splits back."""
        if prefix is not None and ("-" in prefix or not prefix):
            raise ValueError(f"prefix {prefix!r} must be non-empty and without '-'")
        self.prefix = prefix or f"p{os.getpid()}.{uuid.uuid4().hex[:6]}"
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        _live.add(self)

    def next(self) -> str:
        """The next value, never returned before in this run."""
        with self._lock:
            n = next(self._counter)
        return f"{self.prefix}-{n}"

    def _after_fork_child(self) -> None:
        self.prefix = f"{self.prefix}@{os.getpid()}"
        self._lock = threading.Lock()
        self._counter = itertools.count(1)


def split_value(value: str) -> tuple[str, int]:
    """The (prefix, counter) a value was made from: which process wrote it, and when."""
    prefix, _, n = value.rpartition("-")
    if not prefix or not n.isdigit():
        raise ValueError(f"{value!r} was not made by UniqueValues (<prefix>-<counter>)")
    return prefix, int(n)


def _after_fork_child() -> None:
    for v in list(_live):
        v._after_fork_child()


os.register_at_fork(after_in_child=_after_fork_child)
