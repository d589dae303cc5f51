"""Canonical JSON: one text per value, so a view's state at the source and what a store
holds compare as strings.

Both sides of a view store go through `canonical_json`: the view's value PostgreSQL
returned and the value a store's reader found. Numbers compare as numbers (`10.50`,
`10.5` and `10.5e0` are one), keys are sorted, no spaces, and `fields` keeps only the
named dotted paths (the fields a pipeline file's `compare` names).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal, InvalidOperation
from typing import Any

_NOT_JSON = object()


def _number(value: Decimal | float | int) -> int | float | str:
    """An integral number as an int, any other as the shortest float repr; a value
    that is not finite stays text (JSON has no NaN)."""
    try:
        dec = value if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        return str(value)
    if not dec.is_finite():
        return str(value)
    if dec == dec.to_integral_value():
        return int(dec)
    as_float = float(dec)
    return as_float if math.isfinite(as_float) else str(value)


def _normal(value: Any) -> Any:
    """`value` with its numbers made canonical, recursively."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float | Decimal):
        return _number(value)
    if isinstance(value, dict):
        return {str(k): _normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    return str(value)


def _parse(text: str) -> Any:
    try:
        return json.loads(text, parse_float=Decimal)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _project(value: Any, fields: tuple[str, ...] | list[str]) -> Any:
    """Only the dotted paths `fields` of the object `value` (a path that is not there is
    left out; a value that is not an object is kept whole)."""
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for path in fields:
        parts = path.split(".")
        node: Any = value
        for part in parts:
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            target = out
            for part in parts[:-1]:
                target = target.setdefault(part, {})
            target[parts[-1]] = node
    return out


def canonical_json(value: Any, fields: tuple[str, ...] | list[str] | None = None) -> str:
    """The canonical JSON text of `value`: a string is parsed as JSON if it parses
    (else kept as a JSON string), any other value taken as is; numbers numeric, keys
    sorted, no spaces; with `fields`, only those dotted paths of an object."""
    if isinstance(value, str | bytes):
        text = value.decode() if isinstance(value, bytes) else value
        parsed = _parse(text)
        value = text if parsed is _NOT_JSON else parsed
    value = _normal(value)
    if fields:
        value = _project(value, fields)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
