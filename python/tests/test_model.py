"""A hypothesis state machine: random puts, deletes, atomic adds, conditional puts, searches
and counts against a real server, each checked against a plain dict that models the space."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import tesseradb
from tesseradb import GreaterEqual, LessEqual, LessThan, Range

from conftest import is_number, lookup

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
KEYS = st.sampled_from([f"k{i}" for i in range(8)])
# Small numbers collide often (so searches and conditions match), extremes reach overflow.
NUMBERS = st.one_of(st.integers(-5, 5), st.sampled_from([INT64_MIN, INT64_MAX, INT64_MAX - 1]))
TAGS = st.sampled_from(["", "a", "b", "ab"])
DESCRIPTION = "key k\nattributes int n, string t\nsubspace n\nsubspace t\ncreate 8 partitions\n"


def matches(obj: Dict[str, Any], lo: Optional[int], hi: Optional[int], tag: Optional[str]) -> bool:
    return (
        (lo is None or obj["n"] >= lo)
        and (hi is None or obj["n"] <= hi)
        and (tag is None or obj["t"] == tag)
    )


def predicates(lo: Optional[int], hi: Optional[int], tag: Optional[str]) -> Dict[str, Any]:
    p: Dict[str, Any] = {}
    if lo is not None and hi is not None:
        p["n"] = Range(lo, hi) if lo % 2 else (lo, hi)
    elif lo is not None:
        p["n"] = GreaterEqual(lo)
    elif hi is not None:
        p["n"] = [LessEqual(hi), LessThan(INT64_MAX)] if hi < INT64_MAX else LessEqual(hi)
    if tag is not None:
        p["t"] = tag
    return p


@pytest.fixture(scope="module")
def model_space(admin: tesseradb.Admin) -> str:
    from conftest import fresh_name

    name = fresh_name("model")
    admin.add_space(f"space {name}\n{DESCRIPTION}")
    return name


def test_state_machine(client: tesseradb.Client, model_space: str) -> None:
    class SpaceModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model: Dict[str, Dict[str, Any]] = {}

        @initialize()
        def empty(self) -> None:
            client.group_del(model_space, {})

        @rule(key=KEYS, n=NUMBERS, t=TAGS)
        def put(self, key: str, n: int, t: str) -> None:
            assert client.put(model_space, key, {"n": n, "t": t}) is True
            self.model[key] = {"n": n, "t": t}

        @rule(key=KEYS, t=TAGS)
        def put_partial(self, key: str, t: str) -> None:
            assert client.put(model_space, key, {"t": t}) is True
            self.model[key] = dict(self.model.get(key, {"n": 0}), t=t)

        @rule(key=KEYS)
        def delete(self, key: str) -> None:
            expected = True if key in self.model else None
            assert client.delete(model_space, key) is expected
            self.model.pop(key, None)

        @rule(key=KEYS, d=NUMBERS)
        def atomic_add(self, key: str, d: int) -> None:
            got = client.atomic_add(model_space, key, {"n": d})
            if key not in self.model:
                assert got is None
                return
            total = self.model[key]["n"] + d
            if INT64_MIN <= total <= INT64_MAX:
                assert got is True
                self.model[key]["n"] = total
            else:
                assert got is False

        @rule(key=KEYS, expect=NUMBERS, t=TAGS)
        def cond_put(self, key: str, expect: int, t: str) -> None:
            got = client.cond_put(model_space, key, {"n": expect}, {"t": t})
            if key not in self.model:
                assert got is None
            elif self.model[key]["n"] == expect:
                assert got is True
                self.model[key]["t"] = t
            else:
                assert got is False

        @rule(key=KEYS, n=NUMBERS)
        def put_if_not_exist(self, key: str, n: int) -> None:
            got = client.put_if_not_exist(model_space, key, {"n": n})
            if key in self.model:
                assert got is False
            else:
                assert got is True
                self.model[key] = {"n": n, "t": ""}

        @rule(
            lo=st.one_of(st.none(), NUMBERS),
            hi=st.one_of(st.none(), NUMBERS),
            tag=st.one_of(st.none(), TAGS),
        )
        def search_and_count(self, lo: Optional[int], hi: Optional[int], tag: Optional[str]) -> None:
            p = predicates(lo, hi, tag)
            found = {r.pop("k"): r for r in client.search(model_space, p)}
            expected = {k: v for k, v in self.model.items() if matches(v, lo, hi, tag)}
            assert found == expected, p
            assert client.count(model_space, p) == len(expected)

        @rule(key=KEYS)
        def get(self, key: str) -> None:
            assert client.get(model_space, key) == self.model.get(key)

        @invariant()
        def total_count(self) -> None:
            assert client.count(model_space, {}) == len(self.model)

    SpaceModel.TestCase.settings = settings(
        max_examples=50,
        stateful_step_count=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    SpaceModel.TestCase().runTest()


# ---- a walk over a typed space and a dynamic one at once --------------------------------------

PROPERTY_VALUES = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["a", "b"]), st.booleans())
PATCHES = st.fixed_dictionaries(
    {},
    optional={
        "n": PROPERTY_VALUES,
        "t": PROPERTY_VALUES,
        "v": st.one_of(st.none(), st.fixed_dictionaries({}, optional={"w": PROPERTY_VALUES})),
    },
)


def merge_patch(target: Dict[str, Any], patch: Dict[str, Any]) -> Dict[str, Any]:
    """RFC 7396, written again: null removes, objects merge into objects, the rest replaces."""
    out = dict(target)
    for name, value in patch.items():
        if value is None:
            out.pop(name, None)
        elif isinstance(value, dict):
            base = out.get(name)
            out[name] = merge_patch(base if isinstance(base, dict) else {}, value)
        else:
            out[name] = value
    return out


DOCUMENT_SEARCHES = [
    ({"n": GreaterEqual(0)}, lambda d: is_number(lookup(d, "n")) and lookup(d, "n") >= 0),
    ({"t": "a"}, lambda d: lookup(d, "t") == "a"),
    ({"v.w": tesseradb.Exists()}, lambda d: lookup(d, "v.w") is not None),
    ({"t": tesseradb.Missing(), "n": LessEqual(1)}, lambda d: lookup(d, "t") is None and is_number(lookup(d, "n")) and lookup(d, "n") <= 1),
    ({"v": tesseradb.Exists("t")}, lambda d: lookup(d, "v") is not None or lookup(d, "t") is not None),
]


def test_state_machine_mixing_typed_and_dynamic(
    admin: tesseradb.Admin, client: tesseradb.Client, model_space: str
) -> None:
    from conftest import fresh_name

    documents = fresh_name("docs")
    admin.add_space(f"space {documents} dynamic\nkey k\ndimensions 3\ncreate 8 partitions\n")

    class TwoSpaces(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.typed: Dict[str, Dict[str, Any]] = {}
            self.docs: Dict[str, Dict[str, Any]] = {}

        @initialize()
        def empty(self) -> None:
            client.group_del(model_space, {})
            client.group_del(documents, {})

        @rule(key=KEYS, n=NUMBERS, t=TAGS)
        def put_typed(self, key: str, n: int, t: str) -> None:
            assert client.put(model_space, key, {"n": n, "t": t}) is True
            self.typed[key] = {"n": n, "t": t}

        @rule(key=KEYS, patch=PATCHES)
        def put_document(self, key: str, patch: Dict[str, Any]) -> None:
            assert client.put(documents, key, patch) is True
            self.docs[key] = merge_patch(self.docs.get(key, {}), patch)

        @rule(key=KEYS)
        def delete_document(self, key: str) -> None:
            expected = True if key in self.docs else None
            assert client.delete(documents, key) is expected
            self.docs.pop(key, None)

        @rule(key=KEYS)
        def get_both(self, key: str) -> None:
            assert client.get(model_space, key) == self.typed.get(key)
            assert client.get(documents, key) == self.docs.get(key)

        @rule(which=st.integers(0, len(DOCUMENT_SEARCHES) - 1))
        def search_documents(self, which: int) -> None:
            p, holds = DOCUMENT_SEARCHES[which]
            found = {r.pop("k"): r for r in client.search(documents, p)}
            assert found == {k: d for k, d in self.docs.items() if holds(d)}, p
            assert client.count(documents, p) == len(found)

        @invariant()
        def counts(self) -> None:
            assert client.count(model_space, {}) == len(self.typed)
            assert client.count(documents, {}) == len(self.docs)

    TwoSpaces.TestCase.settings = settings(
        max_examples=30,
        stateful_step_count=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    TwoSpaces.TestCase().runTest()
