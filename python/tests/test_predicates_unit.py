"""How predicate dicts turn into the native (attr, op, arg) list; no server needed."""

from __future__ import annotations

import pytest

from tesseradb import (
    Contains,
    Equals,
    GreaterEqual,
    GreaterThan,
    LengthEquals,
    LengthGreaterEqual,
    LengthLessEqual,
    LessEqual,
    LessThan,
    Range,
    Regex,
)
from tesseradb.predicates import to_native


def test_every_class_has_its_wire_name() -> None:
    assert to_native(
        {
            "a": Equals(1),
            "b": LessThan(2),
            "c": LessEqual(3),
            "d": GreaterThan(4),
            "e": GreaterEqual(5),
            "f": Range(6, 7),
            "g": Regex("^x"),
            "h": LengthEquals(1),
            "i": LengthLessEqual(2),
            "j": LengthGreaterEqual(3),
            "k": Contains("y"),
        }
    ) == [
        ("a", "equals", 1),
        ("b", "less", 2),
        ("c", "less_equal", 3),
        ("d", "greater", 4),
        ("e", "greater_equal", 5),
        ("f", "range", (6, 7)),
        ("g", "regex", "^x"),
        ("h", "length_equals", 1),
        ("i", "length_less_equal", 2),
        ("j", "length_greater_equal", 3),
        ("k", "contains", "y"),
    ]


def test_plain_values_tuples_and_lists() -> None:
    assert to_native(None) == []
    assert to_native({}) == []
    assert to_native({"n": 3, "s": "x"}) == [("n", "equals", 3), ("s", "equals", "x")]
    assert to_native({"n": (1, 5)}) == [("n", "range", (1, 5))]
    assert to_native({"n": [GreaterThan(1), (0, 9)]}) == [
        ("n", "greater", 1),
        ("n", "range", (0, 9)),
    ]
    # A list that is not all predicates is a value: equality with a list attribute.
    assert to_native({"l": ["a", "b"]}) == [("l", "equals", ["a", "b"])]
    assert to_native({"l": []}) == [("l", "equals", [])]


def test_misuse() -> None:
    with pytest.raises(TypeError):
        to_native([("n", 1)])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        to_native({1: 2})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        to_native({"n": (1, 2, 3)})
    with pytest.raises(TypeError):
        LengthEquals(True)


def test_predicate_equality_and_repr() -> None:
    assert Range(1, 2) == Range(1, 2) and Range(1, 2) != Range(1, 3)
    assert Equals(1) != LessThan(1)
    assert len({GreaterThan(1), GreaterThan(1)}) == 1
    assert repr(Range(1, 2)) == "Range(1, 2)" and repr(Regex("a")) == "Regex('a')"
