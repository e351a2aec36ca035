"""Every operation of tesseradb.Client and its return conventions, against a real server."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any, Callable, Dict, List

import pytest

import tesseradb
import tesseradb.aio
from conftest import fresh_name
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

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def test_put_get_every_type(client: tesseradb.Client, space: str) -> None:
    attrs = {
        "s": "hello",
        "n": -42,
        "f": 2.5,
        "l": ["b", "a", "b"],
        "st": {"x", "y"},
        "m": {"a": 1, "b": -2},
        "si": {3, 1, 2},
        "ms": {"k": "v"},
    }
    assert client.put(space, "o1", attrs) is True
    got = client.get(space, "o1")
    assert got == attrs
    assert "k" not in got  # the key is not an attribute of get's result
    assert isinstance(got["st"], set) and isinstance(got["l"], list) and isinstance(got["m"], dict)


def test_strings_are_bytes_in_and_bytes_back(client: tesseradb.Client, space: str) -> None:
    """A string is any bytes, as in HyperDex: bytes that are not UTF-8 come back as the same
    bytes, in keys, values, lists, sets and maps; found by equality (the subspace on s hashes
    them) and by length; text comes back as str."""
    raw = bytes(range(256))
    key = b"\xff\x00key"
    attrs = {"s": raw, "l": [b"\x80", "t"], "st": {b"\xc3"}, "ms": {b"\xfe": b"\xed\xa0\x80"}}
    assert client.put(space, key, attrs) is True
    got = client.get(space, key)
    assert got is not None
    assert (got["s"], got["l"], got["st"], got["ms"]) == (raw, [b"\x80", "t"], {b"\xc3"}, {b"\xfe": b"\xed\xa0\x80"})
    assert isinstance(got["s"], bytes)
    found = client.search(space, {"s": raw})
    assert [(o["k"], o["s"]) for o in found] == [(key, raw)]
    assert client.count(space, {"s": LengthEquals(256)}) == 1
    # Bytes that are text are the same string as the str.
    assert client.put(space, b"text", {"s": "caf\u00e9".encode()}) is True
    text = client.get(space, "text")
    assert text is not None and text["s"] == "caf\u00e9"


def test_get_absent_is_none(client: tesseradb.Client, space: str) -> None:
    assert client.get(space, "nobody") is None


def test_multi_get_answers_what_each_get_answers(client: tesseradb.Client, space: str) -> None:
    for n in range(300):
        client.put(space, f"m{n}", {"n": n})
    for n in range(0, 300, 7):
        client.delete(space, f"m{n}")
    # Over one request's 256 keys, with absent, deleted and repeated keys, scrambled.
    keys = [f"m{(n * 37) % 350}" for n in range(400)] + ["m1", "m1"]
    got = client.multi_get(space, keys)
    assert got == [client.get(space, k) for k in keys]
    assert sum(g is not None for g in got) > 250
    assert client.multi_get(space, []) == []
    with pytest.raises(TypeError):
        client.multi_get(space, "m1")
    with pytest.raises(tesseradb.WrongTypeError):
        client.multi_get(space, ["m1", 3])
    with pytest.raises(tesseradb.UnknownSpaceError):
        client.multi_get("no_such_space", ["m1"])


def test_multi_put_reports_each_key_and_is_not_a_transaction(
    client: tesseradb.Client, space: str
) -> None:
    items = {f"q{n}": {"n": n, "s": "x"} for n in range(200)}
    items["q100"] = {"s": "y" * (1024 * 1024 + 10)}  # over the object limit: refused
    outcome = client.multi_put(space, items)
    assert list(outcome) == list(items)
    assert isinstance(outcome["q100"], tesseradb.TooLargeError)
    assert all(e is None for k, e in outcome.items() if k != "q100")
    got = client.multi_get(space, list(items))
    assert got[100] is None
    assert [g["n"] for i, g in enumerate(got) if i != 100] == [n for n in range(200) if n != 100]
    # A value the server refuses fails its key only.
    outcome = client.multi_put(space, {"r1": {"n": 1}, "r2": {"n": "two"}})
    assert outcome["r1"] is None and isinstance(outcome["r2"], tesseradb.WrongTypeError)
    assert client.get(space, "r1") is not None and client.get(space, "r2") is None
    # A malformed argument raises before anything is written.
    with pytest.raises(TypeError):
        client.multi_put(space, [("r3", {"n": 1})])  # type: ignore[arg-type]
    with pytest.raises(tesseradb.WrongTypeError):
        client.multi_put(space, {"r3": {"n": 1}, "r4": {"n": object()}})
    assert client.get(space, "r3") is None


def test_get_by_range_and_get_by_tags_answer_what_a_model_says(
    client: tesseradb.Client, admin: tesseradb.Admin
) -> None:
    timeline, tweets = fresh_name("tl"), fresh_name("tw")
    admin.add_space(
        f"space {timeline} key int id attributes string text "
        "create 16 partitions placement ordered from 0 to 1000"
    )
    admin.add_space(
        f"space {tweets} key int id attributes set(string) tags "
        "create 16 partitions placement tagged tags spread 2"
    )
    # Skewed keys, some outside the declared domain; tags 0 to 3 a tweet.
    keys = [n % 50 for n in range(0, 400, 3)] + [5000 + n for n in range(20)] + [-7, -3]
    model = {k: f"t{k}" for k in keys}
    assert all(e is None for e in client.multi_put(timeline, {k: {"text": v} for k, v in model.items()}).values())
    vocabulary = ["#a", "#b", "@u", "@v"]
    tags = {n: {vocabulary[(n * j) % 4] for j in range(n % 4)} for n in range(120)}
    for n, ts in tags.items():
        client.put(tweets, n, {"tags": ts})
    for start, end, limit in [(0, 10, None), (-10, 0, None), (20, 6000, 7), (900, 100, None)]:
        wanted = sorted(k for k in model if start <= k < end)
        if limit is not None:
            wanted = wanted[:limit]
        got = client.get_by_range(timeline, start, end, limit)
        assert [r["id"] for r in got] == wanted
        assert all(r["text"] == model[r["id"]] for r in got)
    for query in [["#a"], ["@u", "#b"], ["#a", "#b", "@u"], ["none"]]:
        wanted = sorted(n for n, ts in tags.items() if set(query) <= ts)
        assert [r["id"] for r in client.get_by_tags(tweets, query)] == wanted
    assert [r["id"] for r in client.async_get_by_tags(tweets, ["#a"]).wait()] == sorted(
        n for n, ts in tags.items() if "#a" in ts
    )
    with pytest.raises(TypeError):
        client.get_by_tags(tweets, "#a")
    with pytest.raises(ValueError):
        client.get_by_range(timeline, 0, 1, -1)
    with pytest.raises(tesseradb.WrongTypeError):
        client.get_by_tags(timeline, ["#a"])  # no set(string) attribute
    with pytest.raises(tesseradb.WrongTypeError):
        client.get_by_range(timeline, "a", "b")


def test_unset_attributes_have_defaults(client: tesseradb.Client, space: str) -> None:
    client.put(space, "o", {"n": 1})
    got = client.get(space, "o")
    assert got is not None
    assert got["n"] == 1
    assert got["s"] == "" and got["f"] == 0.0 and got["l"] == [] and got["st"] == set()
    assert got["m"] == {} and got["si"] == set() and got["ms"] == {}


def test_put_updates_only_given_attributes(client: tesseradb.Client, space: str) -> None:
    client.put(space, "o", {"s": "a", "n": 1})
    assert client.put(space, "o", {"n": 2}) is True
    got = client.get(space, "o")
    assert got is not None and got["s"] == "a" and got["n"] == 2


def test_bytes_are_strings_and_lists_accepted_for_sets(client: tesseradb.Client, space: str) -> None:
    assert client.put(space, b"bk", {"s": b"bytes", "st": ["a", "a", "b"], "l": ("x", "y")})
    got = client.get(space, "bk")
    assert got is not None
    assert got["s"] == "bytes" and got["st"] == {"a", "b"} and got["l"] == ["x", "y"]


def test_int_for_float_attribute(client: tesseradb.Client, space: str) -> None:
    client.put(space, "o", {"f": 3})
    got = client.get(space, "o")
    assert got is not None and got["f"] == 3.0 and isinstance(got["f"], float)


def test_int64_bounds_round_trip(client: tesseradb.Client, space: str) -> None:
    client.put(space, "lo", {"n": INT64_MIN})
    client.put(space, "hi", {"n": INT64_MAX})
    assert client.get(space, "lo") == client.get(space, "lo")
    assert client.get_partial(space, "lo", ["n"]) == {"n": INT64_MIN}
    assert client.get_partial(space, "hi", ["n"]) == {"n": INT64_MAX}


def test_get_partial(client: tesseradb.Client, space: str) -> None:
    client.put(space, "o", {"s": "a", "n": 7})
    assert client.get_partial(space, "o", ["n"]) == {"n": 7}
    assert client.get_partial(space, "o", ["s", "n"]) == {"s": "a", "n": 7}
    assert client.get_partial(space, "absent", ["n"]) is None
    with pytest.raises(tesseradb.UnknownAttributeError):
        client.get_partial(space, "o", ["nope"])
    with pytest.raises(TypeError):
        client.get_partial(space, "o", "n")  # type: ignore[arg-type]


def test_int_keys(client: tesseradb.Client, make_space: Callable[..., str]) -> None:
    name = make_space("attributes string s\nsubspace s", key="key int id")
    assert client.put(name, 5, {"s": "five"}) is True
    assert client.get(name, 5) == {"s": "five"}
    assert client.get(name, 6) is None
    assert list(client.search(name, {"s": "five"})) == [{"id": 5, "s": "five"}]
    with pytest.raises(tesseradb.WrongTypeError):
        client.put(name, "five", {"s": "x"})


def test_put_if_not_exist(client: tesseradb.Client, space: str) -> None:
    assert client.put_if_not_exist(space, "o", {"n": 1}) is True
    assert client.put_if_not_exist(space, "o", {"n": 2}) is False
    assert client.get_partial(space, "o", ["n"]) == {"n": 1}


def test_cond_put(client: tesseradb.Client, space: str) -> None:
    assert client.cond_put(space, "o", {"n": 1}, {"s": "x"}) is None  # absent
    client.put(space, "o", {"n": 1, "s": "a"})
    assert client.cond_put(space, "o", {"n": 2}, {"s": "x"}) is False
    assert client.get_partial(space, "o", ["s"]) == {"s": "a"}
    assert client.cond_put(space, "o", {"n": 1, "s": "a"}, {"s": "b"}) is True
    assert client.get_partial(space, "o", ["s"]) == {"s": "b"}
    assert client.cond_put(space, "o", {"n": GreaterThan(0)}, {"n": 5}) is True
    assert client.cond_put(space, "o", {}, {"n": 6}) is True  # no condition: any existing object


def test_cond_put_or_create(client: tesseradb.Client, space: str) -> None:
    assert client.cond_put_or_create(space, "o", {"n": 1}, {"n": 3}) is True  # created
    assert client.get_partial(space, "o", ["n"]) == {"n": 3}
    assert client.cond_put_or_create(space, "o", {"n": 1}, {"n": 4}) is False
    assert client.cond_put_or_create(space, "o", {"n": 3}, {"n": 4}) is True
    assert client.get_partial(space, "o", ["n"]) == {"n": 4}


def test_delete_and_cond_del(client: tesseradb.Client, space: str) -> None:
    client.put(space, "o", {"n": 1})
    assert client.delete(space, "o") is True
    assert client.get(space, "o") is None
    assert client.delete(space, "o") is None
    client.put(space, "o", {"n": 1})
    assert client.cond_del(space, "o", {"n": 2}) is False
    assert client.get(space, "o") is not None
    assert client.cond_del(space, "o", {"n": 1}) is True
    assert client.get(space, "o") is None
    assert client.cond_del(space, "o", {"n": 1}) is None


def test_group_del(client: tesseradb.Client, space: str) -> None:
    for i in range(10):
        client.put(space, f"o{i}", {"n": i})
    assert client.group_del(space, {"n": LessThan(4)}) == 4
    assert client.count(space, {}) == 6
    assert client.group_del(space, {"n": LessThan(4)}) == 0
    assert client.group_del(space, {}) == 6
    assert client.count(space, {}) == 0


# (method, initial attributes, argument, expected attributes afterwards)
ATOMIC_CASES: List[Any] = [
    ("atomic_add", {"n": 5}, {"n": 3}, {"n": 8}),
    ("atomic_add", {"f": 1.5}, {"f": 1.0}, {"f": 2.5}),
    ("atomic_sub", {"n": 5}, {"n": 3}, {"n": 2}),
    ("atomic_mul", {"n": 5}, {"n": 3}, {"n": 15}),
    ("atomic_div", {"n": 7}, {"n": 2}, {"n": 3}),
    ("atomic_div", {"n": -7}, {"n": 2}, {"n": -3}),  # truncates toward zero, as in C
    ("atomic_mod", {"n": 7}, {"n": 3}, {"n": 1}),
    ("atomic_mod", {"n": -7}, {"n": 3}, {"n": -1}),  # sign of the dividend, as in C
    ("atomic_and", {"n": 6}, {"n": 3}, {"n": 2}),
    ("atomic_or", {"n": 6}, {"n": 3}, {"n": 7}),
    ("atomic_xor", {"n": 6}, {"n": 3}, {"n": 5}),
    ("atomic_min", {"n": 5}, {"n": 3}, {"n": 3}),
    ("atomic_max", {"n": 5}, {"n": 8}, {"n": 8}),
    ("string_prepend", {"s": "b"}, {"s": "a"}, {"s": "ab"}),
    ("string_append", {"s": "b"}, {"s": "a"}, {"s": "ba"}),
    ("list_lpush", {"l": ["b"]}, {"l": "a"}, {"l": ["a", "b"]}),
    ("list_rpush", {"l": ["b"]}, {"l": "a"}, {"l": ["b", "a"]}),
    ("set_add", {"st": {"a"}}, {"st": "b"}, {"st": {"a", "b"}}),
    ("set_remove", {"st": {"a", "b"}}, {"st": "a"}, {"st": {"b"}}),
    ("set_union", {"st": {"a"}}, {"st": {"b", "c"}}, {"st": {"a", "b", "c"}}),
    ("set_intersect", {"st": {"a", "b"}}, {"st": {"b", "c"}}, {"st": {"b"}}),
    ("map_add", {"m": {"a": 1}}, {"m": {"b": 2}}, {"m": {"a": 1, "b": 2}}),
    ("map_remove", {"m": {"a": 1, "b": 2}}, {"m": "a"}, {"m": {"b": 2}}),
    ("map_atomic_add", {"m": {"a": 5}}, {"m": {"a": 3, "z": 1}}, {"m": {"a": 8, "z": 1}}),
    ("map_atomic_sub", {"m": {"a": 5}}, {"m": {"a": 3}}, {"m": {"a": 2}}),
    ("map_atomic_mul", {"m": {"a": 5}}, {"m": {"a": 3}}, {"m": {"a": 15}}),
    ("map_atomic_div", {"m": {"a": 7}}, {"m": {"a": 2}}, {"m": {"a": 3}}),
    ("map_atomic_mod", {"m": {"a": 7}}, {"m": {"a": 3}}, {"m": {"a": 1}}),
    ("map_atomic_and", {"m": {"a": 6}}, {"m": {"a": 3}}, {"m": {"a": 2}}),
    ("map_atomic_or", {"m": {"a": 6}}, {"m": {"a": 3}}, {"m": {"a": 7}}),
    ("map_atomic_xor", {"m": {"a": 6}}, {"m": {"a": 3}}, {"m": {"a": 5}}),
    ("map_atomic_min", {"m": {"a": 5}}, {"m": {"a": 3}}, {"m": {"a": 3}}),
    ("map_atomic_max", {"m": {"a": 5}}, {"m": {"a": 8}}, {"m": {"a": 8}}),
    ("map_string_prepend", {"ms": {"a": "y"}}, {"ms": {"a": "x"}}, {"ms": {"a": "xy"}}),
    ("map_string_append", {"ms": {"a": "y"}}, {"ms": {"a": "x"}}, {"ms": {"a": "yx"}}),
]


def test_atomic_cases_cover_every_family() -> None:
    from tesseradb._requests import ATOMICS

    assert {case[0] for case in ATOMIC_CASES} == set(ATOMICS)
    for name in ATOMICS:
        for form in (name, "cond_" + name, "group_" + name):
            assert callable(getattr(tesseradb.Client, form))
            assert callable(getattr(tesseradb.Client, "async_" + form))
            assert callable(getattr(tesseradb.aio.Client, form))


def _case_id(case: Any) -> str:
    return f"{case[0]}-{next(iter(case[1]))}"


@pytest.mark.parametrize("case", ATOMIC_CASES, ids=_case_id)
def test_atomic(client: tesseradb.Client, space: str, case: Any) -> None:
    method, initial, arg, expected = case
    attrs = list(expected)
    # Absent object: None, as HyperDex's NOTFOUND.
    assert getattr(client, method)(space, "absent", arg) is None
    assert client.get(space, "absent") is None

    client.put(space, "o", initial)
    assert getattr(client, method)(space, "o", arg) is True
    assert client.get_partial(space, "o", attrs) == expected

    # cond_ form: False when the condition fails (nothing changes), True when it holds.
    client.put(space, "c", dict(initial, n=initial.get("n", 0)))
    cond = getattr(client, "cond_" + method)
    n = initial.get("n", 0)
    assert cond(space, "c", {"n": n + 1000}, arg) is False
    assert client.get_partial(space, "c", attrs) == {a: initial.get(a) for a in attrs}
    assert cond(space, "c", {"n": n}, arg) is True
    assert client.get_partial(space, "c", attrs) == expected
    assert cond(space, "absent", {"n": n}, arg) is None

    # group_ form: applies to every match and counts them.
    group = getattr(client, "group_" + method)
    client.put(space, "g1", dict(initial, s="group") if "s" not in initial else initial)
    client.put(space, "g2", dict(initial, s="group") if "s" not in initial else initial)
    where: Dict[str, Any] = {"s": "group"} if "s" not in initial else {"s": initial["s"]}
    assert group(space, where, arg) == 2
    assert client.get_partial(space, "g1", attrs) == expected
    assert client.get_partial(space, "g2", attrs) == expected
    assert group(space, {"s": "nobody-has-this"}, arg) == 0


def test_atomic_overflow_and_division_by_zero_are_false(client: tesseradb.Client, space: str) -> None:
    client.put(space, "o", {"n": INT64_MAX, "m": {"a": INT64_MIN}})
    assert client.atomic_add(space, "o", {"n": 1}) is False
    assert client.atomic_mul(space, "o", {"n": 2}) is False
    assert client.atomic_div(space, "o", {"n": 0}) is False
    assert client.atomic_mod(space, "o", {"n": 0}) is False
    assert client.map_atomic_sub(space, "o", {"m": {"a": 1}}) is False
    assert client.get_partial(space, "o", ["n", "m"]) == {"n": INT64_MAX, "m": {"a": INT64_MIN}}
    # The whole update fails: no attribute of it changes.
    assert client.atomic_add(space, "o", {"n": 1, "f": 1.0}) is False
    assert client.get_partial(space, "o", ["f"]) == {"f": 0.0}


def test_group_atomic_skips_objects_where_it_cannot_apply(client: tesseradb.Client, space: str) -> None:
    client.put(space, "big", {"s": "g", "n": INT64_MAX})
    client.put(space, "small", {"s": "g", "n": 1})
    assert client.group_atomic_add(space, {"s": "g"}, {"n": 1}) == 1
    assert client.get_partial(space, "big", ["n"]) == {"n": INT64_MAX}
    assert client.get_partial(space, "small", ["n"]) == {"n": 2}


def test_several_attributes_in_one_atomic(client: tesseradb.Client, space: str) -> None:
    client.put(space, "o", {"n": 1, "f": 1.0})
    assert client.atomic_add(space, "o", {"n": 2, "f": 0.5}) is True
    assert client.get_partial(space, "o", ["n", "f"]) == {"n": 3, "f": 1.5}


# Objects for the predicate tests: key -> attributes.
DATA: Dict[str, Dict[str, Any]] = {
    "a": {"s": "apple", "n": 1, "f": 0.5, "l": ["x"], "st": {"red"}, "m": {"k1": 1}},
    "b": {"s": "banana", "n": 2, "f": 1.5, "l": ["x", "y"], "st": {"yellow"}, "m": {}},
    "c": {"s": "cherry", "n": 3, "f": 2.5, "l": [], "st": {"red", "dark"}, "m": {"k1": 1, "k2": 2}},
    "d": {"s": "date", "n": 4, "f": -1.0, "l": ["y", "y", "z"], "st": set(), "m": {"k2": 5}},
    "e": {"s": "elderberry", "n": 5, "f": 10.0, "l": ["z"], "st": {"dark"}, "m": {"k3": 0}},
}

PREDICATE_CASES: List[Any] = [
    ({}, "abcde"),
    ({"n": 3}, "c"),
    ({"s": "banana"}, "b"),
    ({"n": Equals(4)}, "d"),
    ({"n": LessThan(3)}, "ab"),
    ({"n": LessEqual(3)}, "abc"),
    ({"n": GreaterThan(3)}, "de"),
    ({"n": GreaterEqual(3)}, "cde"),
    ({"n": Range(2, 4)}, "bcd"),
    ({"n": (2, 4)}, "bcd"),
    ({"f": Range(0.0, 2.0)}, "ab"),
    ({"f": LessThan(0)}, "d"),
    ({"s": Regex("^[a-c]")}, "abc"),
    ({"s": Regex("rr")}, "ce"),
    ({"s": LessThan("c")}, "ab"),
    ({"s": LengthEquals(4)}, "d"),
    ({"s": LengthLessEqual(5)}, "ad"),
    ({"s": LengthGreaterEqual(6)}, "bce"),
    ({"l": LengthEquals(0)}, "c"),
    ({"l": LengthGreaterEqual(2)}, "bd"),
    ({"st": LengthLessEqual(1)}, "abde"),
    ({"m": LengthEquals(2)}, "c"),
    ({"s": Contains("an")}, "b"),
    ({"l": Contains("y")}, "bd"),
    ({"st": Contains("red")}, "ac"),
    ({"m": Contains("k2")}, "cd"),
    ({"n": [GreaterThan(1), LessThan(5)]}, "bcd"),
    ({"n": [GreaterEqual(2), (1, 3)]}, "bc"),
    ({"n": GreaterThan(1), "st": Contains("red")}, "c"),
    ({"n": 3, "s": "apple"}, ""),
    ({"l": ["x", "y"]}, "b"),
]


@pytest.fixture
def loaded(client: tesseradb.Client, space: str) -> str:
    for key, attrs in DATA.items():
        client.put(space, key, attrs)
    return space


def test_predicates(client: tesseradb.Client, loaded: str) -> None:
    for predicates, expected in PREDICATE_CASES:
        results = list(client.search(loaded, predicates))
        keys = "".join(sorted(r["k"] for r in results))
        assert keys == expected, predicates
        assert client.count(loaded, predicates) == len(expected), predicates
        for r in results:  # search results carry the key and every attribute
            assert r == dict(DATA[r["k"]], k=r["k"], si=set(), ms={})


def test_search_is_an_iterator(client: tesseradb.Client, loaded: str) -> None:
    it = client.search(loaded, {"n": LessEqual(2)})
    assert iter(it) is it
    first = next(it)
    rest = list(it)
    assert sorted([first["k"]] + [r["k"] for r in rest]) == ["a", "b"]
    with pytest.raises(StopIteration):
        next(it)


def test_sorted_search(client: tesseradb.Client, loaded: str) -> None:
    top = client.sorted_search(loaded, {}, "n", 2, "max")
    assert [r["k"] for r in top] == ["e", "d"]
    bottom = client.sorted_search(loaded, {"st": Contains("red")}, "n", 10, "min")
    assert [r["k"] for r in bottom] == ["a", "c"]
    assert [r["k"] for r in client.sorted_search(loaded, {}, "f", 1, "min")] == ["d"]
    assert [r["k"] for r in client.sorted_search(loaded, {}, "s", 5, "max")] == list("edcba")
    assert client.sorted_search(loaded, {}, "n", 0, "max") == []
    with pytest.raises(ValueError):
        client.sorted_search(loaded, {}, "n", 2, "up")


def test_search_describe(client: tesseradb.Client, space: str) -> None:
    text = client.search_describe(space, {"n": 3})
    first = text.splitlines()[0]
    assert first.startswith("subspace 1 (n): 1 of 8 regions, 1 server"), text
    assert "candidate subspace 0: 8 regions" in text
    everything = client.search_describe(space, {})
    assert "8 of 8 regions" in everything.splitlines()[0]


def test_search_streams_many(client: tesseradb.Client, space: str) -> None:
    for i in range(300):
        client.put(space, f"o{i:03}", {"n": i})
    keys = sorted(r["k"] for r in client.search(space, {"n": GreaterEqual(100)}))
    assert keys == [f"o{i:03}" for i in range(100, 300)]


def test_threads_share_a_client(client: tesseradb.Client, space: str) -> None:
    errors: List[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(50):
                assert client.put(space, f"t{t}-{i}", {"n": i}) is True
                assert client.get(space, f"t{t}-{i}") is not None
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert client.count(space, {}) == 400


def test_client_context_manager_and_close(server: Any, space: str) -> None:
    with tesseradb.Client(server.host, server.port) as c:
        assert c.put(space, "o", {"n": 1}) is True
    with pytest.raises(tesseradb.ConnectionFailedError):
        c.get(space, "o")
    assert "Client" in repr(c)


def test_timeout_is_an_option_and_must_be_positive(server: Any, space: str) -> None:
    with tesseradb.Client(server.host, server.port, timeout=2.5) as c:
        assert c.put(space, "t", {"n": 1}) is True
        assert c.get(space, "t")["n"] == 1
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            tesseradb.Client(server.host, server.port, timeout=bad)


def test_read_from_is_an_option_any_or_leader(server: Any, space: str) -> None:
    """read_from="leader" and "any" (the default) both read what was written (standalone they
    are the same server); anything else is a ValueError naming both choices, raised before
    connecting: here to a port where nothing listens, which would otherwise fail to connect."""
    for read_from in ("leader", "any"):
        with tesseradb.Client(server.host, server.port, read_from=read_from) as c:
            key = f"rf-{read_from}"
            assert c.put(space, key, {"n": 7, "s": read_from}) is True
            got = c.get(space, key)
            assert got is not None and (got["n"], got["s"]) == (7, read_from)
            assert c.get(space, "rf-absent") is None

    async def aio_round_trip() -> Any:
        async with await tesseradb.aio.connect(server.host, server.port, read_from="leader") as c:
            assert await c.put(space, "rf-aio", {"n": 8}) is True
            return await c.get(space, "rf-aio")

    assert asyncio.run(aio_round_trip())["n"] == 8

    with socket.socket() as s:  # a free port: nothing listens on it once closed
        s.bind(("127.0.0.1", 0))
        unused = s.getsockname()[1]
    for bad in ("nearest", "Leader"):
        for connect in (tesseradb.Client, tesseradb.aio.Client):
            with pytest.raises(ValueError) as raised:
                connect("127.0.0.1", unused, read_from=bad)
            message = str(raised.value)
            assert '"any"' in message and '"leader"' in message and bad in message
