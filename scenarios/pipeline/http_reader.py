"""An HTTP GET as a derived store: the user's application says what it holds.

The answer is JSON, one of:

- an object, key -> value: `{"k1": "v", "k2": null}` (null: the key is absent); with
  `value_field` (and `version_field`) each value is an object holding them:
  `{"k1": {"value": "v", "version": 3}}`;
- a list of objects, each one key's value (a mirror: the last of a key wins) or one
  arrival (a log): `[{"key": "k1", "value": "v", "version": 3}]`, the fields named by
  `key_field`, `value_field`, `version_field` (default `key`, `value`, none).

Read with the lab's HTTP client (driftlab.harness.lab.services.http_client), as the HTTP source
writes: one GET per reading, on a connection of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from driftlab.harness.lab.services.http_client import http_client
from driftlab.harness.lab.setups.stores import State
from driftlab.scenarios.pipeline.record_fields import as_text, as_version, pick
from driftlab.scenarios.pipeline.spec_sections import FieldPaths

HTTP_TIMEOUT_S = 5.0

Item = tuple[str, str | None, int | None]


class HttpReader:
    """GET `url`; its JSON read as `paths` says."""

    def __init__(self, url: str, paths: FieldPaths) -> None:
        self.url = url
        self.paths = paths
        self._http = http_client(HTTP_TIMEOUT_S, follow_redirects=True)

    def _items(self) -> Iterator[Item]:
        doc = self._http.get(self.url).raise_for_status().json()
        p = self.paths
        if isinstance(doc, dict):
            for key, held in doc.items():
                if p.value is None and p.version is None:
                    yield key, as_text(held), None
                else:
                    value = held if p.value is None else pick(held, p.value)
                    version = as_version(pick(held, p.version)) if p.version else None
                    yield key, as_text(value), version
        elif isinstance(doc, list):
            for item in doc:
                key = as_text(pick(item, p.key or "key"))
                if key is None:
                    raise ValueError(f"{self.url}: an item has no {p.key or 'key'!r}: {item!r:.80}")
                version = as_version(pick(item, p.version)) if p.version else None
                yield key, as_text(pick(item, p.value or "value")), version
        else:
            raise ValueError(f"{self.url} answered {type(doc).__name__}, not an object or a list")

    def read_all(self) -> State:
        """Every key's value (a mirror); null values are absent keys."""
        out: State = {}
        for key, value, version in self._items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = (value, version)
        return out

    def rows(self) -> Counter[tuple[str, str]]:
        """How many items of each (key, value) the answer lists (a log)."""
        return Counter((k, v) for k, v, _ in self._items() if v is not None)

    def close(self) -> None:
        """Nothing held between readings but the client."""
        self._http.close()
