"""Jepsen values (EDN keywords, numbers, sets, micro-ops) as driftlab's text columns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson


def op_f(op: dict[str, Any]) -> str:
    """The op's :f; ops without one (elle-cli style) are named by their micro-ops."""
    f = op.get("f")
    if f is not None:
        return text(f)
    names = {text(m[0]) for m in op.get("value") or () if isinstance(m, list) and m}
    return names.pop() if len(names) == 1 else "txn"


def sends_in(value: Any) -> Iterator[tuple[str, str, int | None]]:
    """The sends among an op's micro-ops, as `send_parts` reads them."""
    for mop in value or ():
        if isinstance(mop, list) and len(mop) >= 3 and text(mop[0]) == "send":
            yield send_parts(mop)


def send_parts(mop: list[Any]) -> tuple[str, str, int | None]:
    """[:send k v] or [:send k [offset v]] as (key, value, offset or None)."""
    k, v = text(mop[1]), mop[2]
    if isinstance(v, list) and len(v) == 2:
        offset, v = v
        return k, text(v), offset if type(offset) is int else None
    return k, text(v), None


def index_extra(op: dict[str, Any]) -> dict[str, Any] | None:
    """Where the event came from in the Jepsen history (its evidence points there)."""
    index = op.get("index")
    return {"jepsen_index": index} if type(index) is int else None


def text(value: Any) -> Any:
    """A Jepsen value as driftlab text: keywords by name, numbers in decimal, anything
    else as JSON; None stays None."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    return json_text(value)


def json_text(value: Any) -> str:
    """`value` as JSON text (EDN sets and ratios made plain)."""
    return orjson.dumps(value, default=_plain, option=orjson.OPT_NON_STR_KEYS).decode()


def _plain(value: Any) -> Any:
    """What JSON lacks: EDN sets as sorted lists, anything else (ratios) as text."""
    if isinstance(value, frozenset):
        return sorted(value, key=str)
    return str(value)
