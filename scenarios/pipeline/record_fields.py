"""Where a key, a value and a version are in a record's JSON: dotted paths.

A Kafka record or an HTTP answer's item holds a pipeline's key, value and version
somewhere in its JSON: `after.value` is the `value` of the object `after` (Debezium's
envelope), `payload.after.value` the same with Connect's schemas on. A path that meets
a null or a missing field gives None: a Debezium delete's `after` is null, so its value
is None, the key absent.
"""

from __future__ import annotations

import json
from typing import Any


def pick(doc: Any, path: str) -> Any:
    """The value at dotted `path` in `doc`, or None where a part is missing or null."""
    for part in path.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def as_text(value: Any) -> str | None:
    """A JSON value as the text driftlab compares: a string as is, null as None, any
    other value as its JSON (`5`, `true`, `{"a": 1}`)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def as_version(value: Any) -> int | None:
    """A version: an integer, or a string of one; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None
