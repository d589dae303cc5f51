"""Canonical JSON: one text per value, so a view's state and a store's value compare as
strings."""

from __future__ import annotations

from decimal import Decimal

import pytest

from driftlab.harness.history.canonical import canonical_json


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ('{"b": 10.50, "a": 1}', '{"a":1.0,"b":10.5}'),
        ("10.50", 10.5),
        ('{"x": [1, 2.0]}', {"x": [Decimal("1.00"), 2]}),
        ('{"n": 1.05e1}', '{"n": 10.5}'),
        ("not json", '"not json"'),
    ],
)
def test_equal_values_have_one_text(a: object, b: object) -> None:
    assert canonical_json(a) == canonical_json(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ('{"a": 1}', '{"a": "1"}'),
        ('{"lines": [1, 2]}', '{"lines": [2, 1]}'),
        ("10.5", "10.51"),
        ('{"a": null}', "{}"),
    ],
)
def test_different_values_stay_different(a: str, b: str) -> None:
    assert canonical_json(a) != canonical_json(b)


def test_text_is_sorted_and_compact() -> None:
    assert canonical_json('{ "b" : [ 1 , 2.50 ], "a" : "é" }') == '{"a":"é","b":[1,2.5]}'
    # Beyond a float's precision a number keeps its value as an int.
    assert canonical_json("12345678901234567890") == "12345678901234567890"


def test_compare_keeps_the_named_dotted_paths() -> None:
    doc = '{"id": "k1", "at": "12:00", "order": {"status": "new", "n": 2}, "lines": []}'
    assert canonical_json(doc, ["order.status", "lines", "absent.x"]) == (
        '{"lines":[],"order":{"status":"new"}}'
    )
    # A value that is no object is compared whole.
    assert canonical_json("7", ["status"]) == "7"
