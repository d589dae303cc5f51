"""The source database: one commit order, a version per key, a log position per commit."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Database:
    """Rows of key -> (value, version); every commit takes the next log position (LSN)."""

    rows: dict[str, tuple[str, int]] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)  # outlive deletes
    lsn: int = 0

    def write(self, key: str, value: str) -> tuple[int, int]:
        """Commit `key = value`; return the row's new version and the commit's LSN."""
        version = self._next_version(key)
        self.rows[key] = (value, version)
        return version, self.lsn

    def delete(self, key: str) -> tuple[int, int] | None:
        """Commit the deletion of a present key; return its version and LSN, else None."""
        if key not in self.rows:
            return None
        del self.rows[key]
        return self._next_version(key), self.lsn

    def _next_version(self, key: str) -> int:
        # A key deleted and written again continues its versions: they order its history.
        version = self.versions.get(key, 0) + 1
        self.versions[key] = version
        self.lsn += 1
        return version

    def increment(self, key: str) -> tuple[str, int, int]:
        """Commit `key = key + 1` (a counter); return the new total, version and LSN."""
        total = int(self.rows[key][0]) + 1 if key in self.rows else 1
        value = str(total)
        version, lsn = self.write(key, value)
        return value, version, lsn
