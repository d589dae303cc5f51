"""A derived key-value store: the cache, a search index or a counter view."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class KeyValueStore:
    """Key -> (value, version of the source write it came from).

    A deletion is kept as a tombstone (value None) with its version, so an idempotent
    consumer can still refuse an older write of the key redelivered after it.
    """

    name: str
    rows: dict[str, tuple[str | None, int | None]] = field(default_factory=dict)

    def values(self) -> dict[str, str]:
        """The keys the store holds, with their values (tombstones are absent keys)."""
        return {k: v for k, (v, _) in self.rows.items() if v is not None}

    def version(self, key: str) -> int:
        """The version held for key, 0 when absent or unversioned."""
        row = self.rows.get(key)
        return (row[1] or 0) if row else 0

    def put(self, key: str, value: str, version: int | None) -> None:
        """Blind overwrite: last writer wins, whatever its version."""
        self.rows[key] = (value, version)

    def put_if_newer(self, key: str, value: str | None, version: int) -> bool:
        """Idempotent, version-checked write (None: delete): apply only a newer version."""
        if version <= self.version(key):
            return False
        self.rows[key] = (value, version)
        return True

    def increment(self, key: str, version: int | None) -> str:
        """Non-idempotent effect: add one to the key's count; return the new count."""
        row = self.rows.get(key)
        value = str(int(row[0]) + 1 if row and row[0] is not None else 1)
        self.rows[key] = (value, version)
        return value
