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


# --- the fast path ----------------------------------------------------------------------

# Lines the fast path reads (Jepsen's and Maelstrom's ops) and lines it leaves to the
# general reader (a set, escapes, a string over two lines, two forms, a comment, ...),
# mixed so that the reader goes from one path to the other and back.
VARIED = """\
{:type :invoke, :f :send, :value [[:send 9 1]], :time 15377573, :process 0, :index 0}
#jepsen.history.Op{:index 1, :time 16000000, :type :ok, :f :send, :value [[:send 9 [0 1]]]}
{:type :ok, :f :poll, :value [[:poll {"9" [[0 1] [1 2]] "10" []}]], :time 17, :process 1, :index 2}
{:type :info, :f :send, :value [[:send :x -3]], :error "net-timeout", :process 2, :index 3}
{:type :info, :f :start-partition, :value [:isolated {"n1" #{"n2" "n3"}}], :process :nemesis}
{:type :fail, :f :poll, :value nil, :error [:ok true false], :process 3, :index 5}

{:type :ok, :error "a \\"quoted\\" word", :index 6}  ; a comment after the op
{:a {[1 2] :vector-key, {:m 1} :map-key}, :b [], :c {}}
{:multi "a string over
two lines", :index 7}
{:n 1} {:n 2}
[1 2 [3 [4]]]
{:big 9N, :ratio 1/2, :float 2.5, :sym foo, :char \\a, :list (1 2)}
#_ {:discarded 1} {:kept 1}
{:tagged #inst "2026-01-01T00:00:00Z", :odd ##Inf}
{:unicode "é ✓", :digits 0123, :minus -0}
"""


def strict(value: Any) -> str:
    """A value as text that tells apart what `==` does not: keywords from strings,
    True from 1."""
    return repr(plain(value))


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
def test_fast_path_reads_what_the_general_reader_reads(chunk: int) -> None:
    """The same forms, of the same types, either way: the importer's events follow
    from the forms alone, so they are the same too."""
    general = list(edn.read_forms(io.StringIO(VARIED), unwrap=False, fast=False))
    fast = list(edn.read_forms(io.StringIO(VARIED), unwrap=False, chunk=chunk))
    assert [strict(f) for f in fast] == [strict(f) for f in general]
    assert len(general) == 16  # every line above read, the discarded map left out


@settings(max_examples=200, deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=8), st.integers(min_value=1, max_value=60))
def test_fast_path_agrees_on_any_edn(forms: list[Any], chunk: int) -> None:
    """Whatever edn_format writes, one form a line (maps and vectors of anything: the
    fast path reads some, the general reader the rest), both paths read alike."""
    text = "\n".join(edn_format.dumps(f) for f in forms) + "\n"
    general = [strict(f) for f in edn.read_forms(io.StringIO(text), fast=False)]
    assert [strict(f) for f in edn.read_forms(io.StringIO(text), chunk=chunk)] == general


K = edn_format.Keyword
JEPSEN_KEYS = st.one_of(
    st.integers(0, 20), st.integers(0, 20).map(str), st.sampled_from("xyz").map(K)
)
JEPSEN_VALUES = st.one_of(st.integers(0, 10**6), st.integers(0, 10**6).map(str))
MICRO_OPS = st.one_of(
    st.tuples(st.just(K("send")), JEPSEN_KEYS, JEPSEN_VALUES).map(list),
    st.tuples(
        st.just(K("send")), JEPSEN_KEYS, st.tuples(st.integers(-1, 10**6), JEPSEN_VALUES).map(list)
    ).map(list),
    st.just([K("poll")]),
    st.dictionaries(
        JEPSEN_KEYS,
        st.lists(st.tuples(st.integers(0, 10**6), JEPSEN_VALUES).map(list), max_size=5),
        max_size=3,
    ).map(lambda read: [K("poll"), read]),
)
JEPSEN_OPS = st.fixed_dictionaries(
    {
        K("type"): st.sampled_from(["invoke", "ok", "fail", "info"]).map(K),
        K("f"): st.sampled_from(["send", "poll", "txn", "assign"]).map(K),
        K("value"): st.one_of(st.none(), st.lists(MICRO_OPS, max_size=4)),
        K("time"): st.integers(0, 2**62),
        K("process"): st.one_of(st.integers(0, 50), st.just(K("nemesis"))),
        K("index"): st.integers(0, 10**7),
    },
    optional={K("error"): st.one_of(st.text(max_size=8), st.lists(st.sampled_from([K("a"), 1])))},
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(JEPSEN_OPS, st.booleans()), min_size=1, max_size=20),
    st.integers(min_value=1, max_value=200),
)
def test_fast_path_agrees_on_jepsen_ops(ops: list[tuple[Any, bool]], chunk: int) -> None:
    """Kafka-workload ops as Jepsen writes them (plain maps or `#jepsen.history.Op`
    records; integer, string and keyword keys; errors of any text), both ways."""
    text = "".join(
        ("#jepsen.history.Op" if record else "") + edn_format.dumps(op) + "\n" for op, record in ops
    )
    general = [strict(f) for f in edn.read_forms(io.StringIO(text), fast=False)]
    assert [strict(f) for f in edn.read_forms(io.StringIO(text), chunk=chunk)] == general
    assert len(general) == len(ops)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{:a 1}\n{:b [1 2}\n{:c 3}\n", "line 2: unexpected '}'"),
        ("{:a 1}\n\n{:a 1 :b}\n", "line 3: a map with an odd number of forms"),
        ("{:a 1}\n{:a [1\n", "line 3: the text ends inside '\\['"),
    ],
)
def test_fast_path_leaves_errors_to_the_general_reader(text: str, message: str) -> None:
    """A line the fast path cannot read goes to the general reader, which names it."""
    with pytest.raises(edn.EDNError, match=message) as general:
        list(edn.read_forms(io.StringIO(text), fast=False))
    with pytest.raises(edn.EDNError) as fast:
        list(edn.read_forms(io.StringIO(text), chunk=5))
    assert str(fast.value) == str(general.value)
