"""Peak resident memory of process trees, sampled from /proc while a benchmark runs:
a Spark driver and its JVM, an executor and its Python workers; and the CPU time such a
tree has spent (`tree_cpu_s`)."""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from pathlib import Path
from types import TracebackType

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> tuple[dict[int, list[int]], dict[int, int]]:
    """(children of each pid, resident bytes of each pid), from /proc."""
    children: dict[int, list[int]] = defaultdict(list)
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            pages = int((entry / "statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # ended between the listing and the read
        # The command name may hold spaces and parentheses: the fields follow the last ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children[ppid].append(int(entry.name))
        rss[int(entry.name)] = pages * PAGE
    return children, rss


def _tree_rss(root: int, children: dict[int, list[int]], rss: dict[int, int], own: bool) -> int:
    """Resident bytes of `root`'s descendants, and of `root` itself when `own`."""
    total = rss.get(root, 0) if own else 0
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, ()))
    return total


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds (user and system) that `root` (this process by default) and its live
    descendants have spent, with the children they reaped: a driver, its JVM and the
    JVM's Python workers. Time the work between two calls."""
    root = os.getpid() if root is None else root
    children, _ = _processes()
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended since the listing
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), 12-15 after the name.
        total += sum(int(f) for f in fields[11:15]) / TICK
        stack.extend(children.get(pid, ()))
    return total


class PeakMemory:
    """Samples, every `interval_s` in a thread of its own, the resident memory of named
    process trees and keeps each one's peak (bytes). A tree is a root pid and whether
    the root itself counts: a Spark worker daemon's executors are its children, and the
    daemon's own memory is not the executor's.

    Use as a context manager; `track` adds a tree while it runs."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.peaks: dict[str, int] = {}
        self._trees: dict[str, tuple[int, bool]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def track(self, name: str, pid: int, *, own: bool = True) -> None:
        """Sample the tree of `pid` under `name` from now on."""
        with self._lock:
            self._trees[name] = (pid, own)
            self.peaks.setdefault(name, 0)

    def sample(self) -> None:
        """Take one sample of every tree now."""
        children, rss = _processes()
        with self._lock:
            for name, (pid, own) in self._trees.items():
                used = _tree_rss(pid, children, rss, own)
                self.peaks[name] = max(self.peaks[name], used)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
