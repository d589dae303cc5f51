"""The streaming EDN reader agrees with edn_format, the maintained EDN package it stands
in for (harness/lab/importers/edn.py says why), on the text edn_format itself writes."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import edn_format
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftlab.harness.lab.importers import edn

NAMES = st.from_regex(r"[a-z][a-z0-9\-]{0,6}(/[a-z][a-z0-9]{0,4})?", fullmatch=True)
ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    NAMES.map(edn_format.Keyword),
    NAMES.filter(lambda s: s not in ("nil", "true", "false")).map(edn_format.Symbol),
)
HASHABLE = st.one_of(st.integers(), st.text(max_size=5), NAMES.map(edn_format.Keyword))
VALUES = st.recursive(
    ATOMS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(HASHABLE, inner, max_size=4),
        st.frozensets(HASHABLE, max_size=4),
    ),
    max_leaves=25,
)


def plain(value: Any) -> Any:
    """Either reader's value as plain Python data, keywords and symbols tagged."""
    if isinstance(value, edn_format.Keyword | edn.Keyword):
        return ("keyword", value.name if isinstance(value, edn_format.Keyword) else str(value))
    if isinstance(value, edn_format.Symbol | edn.Symbol):
        return ("symbol", value.name if isinstance(value, edn_format.Symbol) else str(value))
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, Mapping):
        return {"map": sorted((repr(plain(k)), plain(v)) for k, v in value.items())}
    if isinstance(value, frozenset):
        return {"set": sorted(repr(plain(v)) for v in value)}
    if isinstance(value, Sequence):
        return [plain(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=6), st.integers(min_value=1, max_value=40))
def test_reads_what_edn_format_reads(forms: list[Any], chunk: int) -> None:
    """Forms written by edn_format, one a line, read alike by both readers, whatever
    the chunk size the stream is read in."""
    text = "\n".join(edn_format.dumps(f) for f in forms) + "\n"
    expected = [plain(f) for f in edn_format.loads_all(text)]
    assert [
        plain(f) for f in edn.read_forms(io.StringIO(text), unwrap=False, chunk=chunk)
    ] == expected


def test_jepsen_records_tags_comments_and_discards() -> None:
    text = (
        '#jepsen.history.Op{:index 0, :type :ok, :value [[:poll {"k" [[1 2]]}]]}\n'
        ";; a comment\n"
        '{:time #inst "2026-01-01T00:00:00Z", #_ :dropped #_ 1 :ratio 1/2, :big 9N}\n'
        "[\\a \\newline \\u0041 ##Inf 2.5M -3]\n"
    )
    op, times, chars = edn.read_forms(io.StringIO(text), unwrap=False)
    assert op == {"index": 0, "type": "ok", "value": [["poll", {"k": [[1, 2]]}]]}
    assert isinstance(op["type"], edn.Keyword) and repr(op["type"]) == ":ok"
    assert times == {"time": "2026-01-01T00:00:00Z", "ratio": Fraction(1, 2), "big": 9}
    assert chars == ["a", "\n", "A", float("inf"), 2.5, -3]


def test_one_vector_streams_its_elements() -> None:
    forms = edn.read_forms(io.StringIO("[{:a 1}\n {:b [2]}]\n"), chunk=3)
    assert list(forms) == [{"a": 1}, {"b": [2]}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{:a 1}\n{:b [1 2}\n", "line 2: unexpected '}'"),
        ('{:a "open\n', "line 1: an unterminated string"),
        ("{:a 1 :b}\n", "line 1: a map with an odd number of forms"),
        ("\n\n[1 2\n", "line 4: the text ends inside '\\['"),
        ("^:meta {}\n", "metadata"),
        ("{:n 1x}\n", "'1x' is not an EDN number"),
    ],
)
def test_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(edn.EDNError, match=message):
        list(edn.read_forms(io.StringIO(text)))
