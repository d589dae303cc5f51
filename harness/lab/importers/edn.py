"""A streaming EDN reader for histories of many gigabytes.

EDN is the text Clojure's `prn` writes: Jepsen's `history.edn` holds one operation per
line (or, from some tools, one vector of them). `read_forms(stream)` yields the
top-level forms one at a time from chunks of the stream, so memory holds one form, not
the file.

Why not the maintained `edn_format` package (PyPI)? It parses correctly but builds a
PLY lexer and parser per call: 690 µs a Jepsen op line one at a time, 210 µs batched
(measured on the 2-core development machine), which is 7 minutes or more for the 2M
lines of a 1M-op history before any analysis. This reader is a single regular
expression and a stack; it is checked against `edn_format` by a property test
(tests/test_edn_reader.py), which is its specification. A line that holds one plain map
or vector, as Jepsen writes each op, takes a fast path (`_plain_map`: one loop over the
line's tokens) that makes the same values, at about half the CPU.

Values read: maps are dicts (vector or map keys become tuples, so they hash), vectors
and lists are lists, sets frozensets, keywords `Keyword` and symbols `Symbol` (both
`str` subclasses, so `:ok` is `Keyword("ok")`), strings str, integers int, decimals
float, ratios Fraction, `nil`/`true`/`false` None/True/False, characters one-character
strings. A tagged literal reads as its value: `#jepsen.history.Op{...}` is the map,
`#inst "..."` the string. `#_` discards the next form; metadata (`^`) is refused.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from fractions import Fraction
from typing import Any, TextIO

import orjson

CHUNK = 1 << 20


class EDNError(ValueError):
    """Text that is not EDN; the message names the line."""


class Keyword(str):
    """An EDN keyword, `:name` (without its colon)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f":{self}"


class Symbol(str):
    """An EDN symbol (other than nil, true and false)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


_ATOM = r"[^\s,\[\](){}\"\\;]"
"""A character that may stand in an atom: no whitespace, comma, bracket, quote,
backslash or semicolon."""
_TOKENS = re.compile(
    r"""
    (?:[\s,]+|;[^\n]*)*                   # whitespace (commas too) and comments, skipped
    (?:("(?:[^"\\]|\\.)*")                 # 1 a whole string
      |([\[({])                            # 2 opening bracket
      |([\])}])                            # 3 closing bracket
      |(\#(?:\{|_|\#?(?:(?!\#)ATOM)*))     # 4 dispatch: set, discard, tag, ##Inf
      |(\\(?:newline|space|tab|return|backspace|formfeed|u[0-9a-fA-F]{4}|.))  # 5 char
      |(ATOM+)                             # 6 any other atom
      |(.)                                 # 7 anything else: an open string, a stray char
      |\Z)                                 # (none) the end of the text
    """.replace("ATOM", _ATOM),
    re.VERBOSE | re.DOTALL,
)
_PLAIN_TOKENS = re.compile(r'[\[\]{}]|"[^"\\\n]*"|ATOM+|[^\s,]'.replace("ATOM", _ATOM))
r"""The fast path's tokens: brackets, strings without escapes, atoms; `[^\s,]` stands for
anything else (a set, a list, a character, a comment, a broken string), which sends the
line to the general reader."""
_Next = tuple[int | None, int]
"""Where a path of the reader stops: the position the other path goes on from (None when
the chunk is done), and the start of the chunk's unread tail."""
_CHARS = {
    "newline": "\n",
    "space": " ",
    "tab": "\t",
    "return": "\r",
    "backspace": "\b",
    "formfeed": "\f",
}
_CONSTANTS: dict[str, Any] = {"nil": None, "true": True, "false": False}
_SYMBOLIC = {"##Inf": float("inf"), "##-Inf": float("-inf"), "##NaN": float("nan")}
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_SET = "#{"
_DISCARD = "#_"


def read_forms(
    stream: TextIO, *, unwrap: bool = True, chunk: int = CHUNK, fast: bool = True
) -> Iterator[Any]:
    """Every top-level form of `stream`, one at a time.

    With `unwrap`, a stream that is one top-level vector (`[{...} {...} ...]`) yields its
    elements instead, as they are read, so a history written as one vector streams too.
    With `fast`, a line that holds one plain map (an op as Jepsen writes it) is read by
    the fast path (`_plain_map`), any other by the general reader: the values are the
    same either way (tests/test_edn_reader.py); `fast=False` reads everything generally.
    """
    reader = _Reader(unwrap, fast)
    carry = ""
    while True:
        text = stream.read(chunk)
        eof = not text
        buf = carry + text
        carry = yield from reader.feed(buf, eof)
        if eof:
            reader.finish()
            return


def loads(text: str) -> Any:
    """The single form of `text` (an error when there is not exactly one)."""
    reader = _Reader(unwrap=False)
    forms = list(reader.feed(text, eof=True))
    reader.finish()
    if len(forms) != 1:
        raise EDNError(f"expected one EDN form, found {len(forms)}")
    return forms[0]


class _Reader:
    """The state of a read across chunks: open containers and the line count."""

    def __init__(self, unwrap: bool, fast: bool = False) -> None:
        self.unwrap = unwrap
        self.fast = fast
        self.items: list[list[Any]] = []  # open containers' elements, innermost last
        self.kinds: list[str] = []  # their opening token ("[", "(", "{", "#{", "#_")
        self.spilling = False  # inside the unwrapped top-level vector
        self.started = False  # some form (or the unwrapped vector) began
        self.line = 1  # line at the start of the current chunk
        self.keywords: dict[str, Keyword] = {}

    def feed(self, buf: str, eof: bool) -> Iterator[Any]:
        """Yield the forms completed in `buf`; return the unread tail (a token or line
        that the next chunk may continue)."""
        pos: int | None = 0
        tail = len(buf)
        while pos is not None:
            if self.fast and not self.kinds:
                pos, tail = yield from self._lines(buf, pos, eof)
            if pos is not None:
                pos, tail = yield from self._tokens(buf, pos, eof)
        self.line += buf.count("\n", 0, tail)
        return buf[tail:]

    def _lines(self, buf: str, pos: int, eof: bool) -> Generator[Any, None, _Next]:
        """The fast path at the top level: yield the plain maps of the whole lines from
        `pos` on, up to a line that is none (where the general reader goes on)."""
        end = len(buf)
        keywords = self.keywords
        while pos < end:
            stop = buf.find("\n", pos)
            if stop < 0:
                if not eof:
                    return None, pos  # the line may go on in the next chunk
                stop = end
            tokens = _PLAIN_TOKENS.findall(buf, pos, stop)
            if tokens:
                if not self.started and tokens[0] == "[":
                    return pos, end  # perhaps the one vector to unwrap
                value = _plain_map(tokens, keywords)
                if value is None:
                    return pos, end
                self.started = True
                yield value
            pos = stop + 1
        return None, end

    def _tokens(self, buf: str, pos: int, eof: bool) -> Generator[Any, None, _Next]:
        """The general reader from `pos`: yield the forms completed, up to the end of
        `buf` or, with `fast`, a top-level form (where the fast path may go on)."""
        items, kinds, keywords = self.items, self.kinds, self.keywords
        end = len(buf)
        for m in _TOKENS.finditer(buf, pos):
            group = m.lastindex
            if not eof and m.end() == end and group not in (1, 2, 3):
                # The token (or a comment) may go on in the next chunk: read it again.
                return None, m.start()
            if group is None:
                continue  # only whitespace and comments were left
            tok = m.group(group)
            if group == 6:
                # The two commonest atoms inline: keywords and plain integers.
                c = tok[0]
                if c == ":" and tok in keywords:
                    value = keywords[tok]
                elif "0" <= c <= "9" and tok.isdigit():
                    value = int(tok)
                else:
                    value = self._atom(tok, buf, m.start(group))
            elif group == 2:
                if not items and self.unwrap and not self.started and tok == "[":
                    self.spilling = True
                self.started = True
                items.append([])
                kinds.append(tok)
                continue
            elif group == 3:
                if not kinds or (
                    kinds[-1] != _CLOSERS[tok] and not (tok == "}" and kinds[-1] == _SET)
                ):
                    raise self._error(buf, m.start(group), f"unexpected {tok!r}")
                kind = kinds.pop()
                elements = items.pop()
                if self.spilling and not items:
                    self.spilling = False
                    continue
                value = self._container(kind, elements, buf, m.start(group))
            elif group == 1:
                value = orjson.loads(tok) if "\\" in tok else tok[1:-1]
            elif group == 4:
                if tok in (_SET, _DISCARD):
                    self.started = True
                    items.append([])
                    kinds.append(tok)
                    continue
                if tok in _SYMBOLIC:
                    value = _SYMBOLIC[tok]
                elif len(tok) > 1 and tok[1] != "#":
                    continue  # a tag: the tagged value stands for itself
                else:
                    raise self._error(buf, m.start(group), f"{tok!r} is no EDN dispatch")
            elif group == 5:
                name = tok[1:]
                value = _CHARS.get(name) or (chr(int(name[1:], 16)) if len(name) == 5 else name)
            else:
                if tok == '"' and not eof:
                    return None, m.start()
                what = "an unterminated string" if tok == '"' else f"unexpected {tok!r}"
                raise self._error(buf, m.start(group), what)
            # A complete value: discard it, add it to its container, or yield it.
            if kinds and kinds[-1] == _DISCARD:
                kinds.pop()
                items.pop()
            elif items and not (self.spilling and len(items) == 1):
                items[-1].append(value)
            else:
                self.started = True
                yield value
                if self.fast and not kinds:
                    return m.end(), end
        return None, end

    def finish(self) -> None:
        """At the end of the text: no container may be left open."""
        if self.kinds:
            raise EDNError(f"line {self.line}: the text ends inside {self.kinds[-1]!r}")

    def _atom(self, tok: str, buf: str, pos: int) -> Any:
        c = tok[0]
        if c == ":":
            # Histories repeat a few keywords millions of times: make each once.
            kw = self.keywords.get(tok)
            if kw is None:
                kw = self.keywords[tok] = Keyword(tok[1:])
            return kw
        if c.isdigit() or (c in "+-" and len(tok) > 1 and tok[1].isdigit()):
            return self._number(tok, buf, pos)
        if tok in _CONSTANTS:
            return _CONSTANTS[tok]
        if c == "^":
            raise self._error(buf, pos, "metadata (^) is not supported")
        return Symbol(tok)

    def _number(self, tok: str, buf: str, pos: int) -> int | float | Fraction:
        try:
            return int(tok[:-1] if tok[-1] == "N" else tok)
        except ValueError:
            pass
        try:
            return float(tok[:-1] if tok[-1] == "M" else tok)
        except ValueError:
            pass
        num, _, den = tok.partition("/")
        try:
            return Fraction(int(num), int(den))
        except ValueError:
            raise self._error(buf, pos, f"{tok!r} is not an EDN number") from None

    def _container(self, kind: str, elements: list[Any], buf: str, pos: int) -> Any:
        if kind == "{":
            if len(elements) % 2:
                raise self._error(buf, pos, "a map with an odd number of forms")
            return _map(elements)
        if kind == _SET:
            return frozenset(map(_hashable, elements))
        return elements

    def _error(self, buf: str, pos: int, what: str) -> EDNError:
        return EDNError(f"line {self.line + buf.count(chr(10), 0, pos)}: {what}")


def _plain_map(tokens: list[str], keywords: dict[str, Keyword]) -> Any:
    """The one form of a line's `tokens` (`_PLAIN_TOKENS`) when it is a map or vector
    of keywords, integers, strings without escapes, nil, true and false, tagged or not
    (as Jepsen writes an op); else None, and the general reader reads the line. The
    values are those the general reader makes: keywords from its `keywords`, maps by
    `_map`."""
    elements: list[Any] | None = None  # the open container's, None at the top level
    outer: list[list[Any] | None] = []  # the enclosing containers' elements
    closers: list[str] = []  # the closing bracket each open container expects
    form = None
    for tok in tokens:
        c = tok[0]
        if c == ":":
            value = keywords.get(tok)
            if value is None:
                value = keywords[tok] = Keyword(tok[1:])
        elif c == "[" or c == "{":
            if form is not None:
                return None  # a second form on the line
            outer.append(elements)
            elements = []
            closers.append("]" if c == "[" else "}")
            continue
        elif c == "]" or c == "}":
            if not closers or closers.pop() != c or elements is None:
                return None
            value = elements
            if c == "}":
                if len(value) % 2:
                    return None
                value = _map(value)
            elements = outer.pop()
            if elements is None:
                form = value
                continue
        elif tok.isdecimal() or (c == "-" and tok[1:].isdecimal()):
            value = int(tok)
        elif c == '"':
            if len(tok) < 2:
                return None  # a string that goes on past the line, or has escapes
            value = tok[1:-1]
        elif tok in _CONSTANTS:
            value = _CONSTANTS[tok]
        elif c == "#" and tok[1:2].isalpha() and "#" not in tok[1:]:
            continue  # a tag: the tagged value stands for itself
        else:
            return None
        if elements is None:
            return None  # an atom at the top level
        elements.append(value)
    return form if not closers else None


def _map(elements: list[Any]) -> dict[Any, Any]:
    """A map of an even number of `elements`, keys and values in turn."""
    keys = elements[::2]
    try:
        return dict(zip(keys, elements[1::2], strict=True))
    except TypeError:
        return dict(zip(map(_hashable, keys), elements[1::2], strict=True))


def _hashable(value: Any) -> Any:
    """A map key or set element as a hashable value: lists become tuples, maps
    tuples of their items."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((_hashable(k), _hashable(v)) for k, v in value.items())
    return value
