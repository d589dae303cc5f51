"""A Jepsen history file as a stream of ops: EDN (Jepsen's store, one op per line or
one vector) or JSON (elle-cli's array, JSON lines), read in chunks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import orjson

from driftlab.harness.lab.importers import edn

FORMATS = ("edn", "json")


class JepsenImportError(ValueError):
    """A history that cannot be imported; the message names the op and the fix."""


def detect_format(path: Path) -> str:
    """`edn` or `json`, from the file name (history.edn, history.json, *.jsonl)."""
    suffix = path.suffix.lower()
    if suffix == ".edn":
        return "edn"
    if suffix in (".json", ".jsonl"):
        return "json"
    raise JepsenImportError(
        f"{path}: cannot tell EDN from JSON by its name; name it *.edn or *.json"
    )


def read_ops(stream: TextIO, fmt: str) -> Iterator[dict[str, Any]]:
    """The operations of a history, one at a time, as maps with string keys (EDN
    keywords are `str` subclasses, so `op["type"] == "ok"` holds for both formats)."""
    forms = edn.read_forms(stream) if fmt == "edn" else _json_ops(stream)
    for n, op in enumerate(forms, 1):
        if not isinstance(op, dict):
            raise JepsenImportError(f"op #{n} is {type(op).__name__}, not a map: {op!r:.80}")
        yield op


def _json_ops(stream: TextIO) -> Iterator[Any]:
    """JSON ops: an array with one op per line (elle-cli), JSON lines, or ops spread
    over several lines; a whole array on one line is read whole."""
    buf = ""
    for line in stream:
        text = line.strip()
        if not buf and text.startswith("["):
            text = text[1:].lstrip()  # the array's opening bracket
        if not text:
            continue
        buf = f"{buf}\n{text}" if buf else text
        # The op alone, or the op followed by the array's closing bracket.
        for candidate in (buf.rstrip(","), buf.removesuffix("]").rstrip().rstrip(",")):
            try:
                value = orjson.loads(candidate)
            except orjson.JSONDecodeError:
                continue
            buf = ""
            yield value
            break
    rest = buf.strip().rstrip("]").strip()
    if rest:
        try:
            yield from orjson.loads(f"[{rest}]")
        except orjson.JSONDecodeError as e:
            raise JepsenImportError(f"the JSON history ends in an unreadable op: {e}") from None
