"""Dynamic spaces from Python: documents as dicts (nested, with bools, lists and None),
merged by put, searched by value on dotted paths and by structure (Exists, Missing), against
a brute-force filter written here; explain's shapes; bad documents refused, nothing changed.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Dict, List

import pytest

import tesseradb
from tesseradb import Exists, GreaterEqual, LessThan, Missing, Range

from conftest import fresh_name, is_number, lookup

Doc = Dict[str, Any]


def dynamic_space(admin: tesseradb.Admin) -> str:
    name = fresh_name("dyn")
    admin.add_space(f"space {name} dynamic\nkey id\ndimensions 4\ncreate 16 partitions\n")
    return name


def test_documents_round_trip_and_merge(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    name = dynamic_space(admin)
    paper = {
        "title": "Dynamo",
        "year": 2007,
        "open": True,
        "venue": {"name": "SOSP", "pages": [205, 220]},
        "authors": ["DeCandia", "Vogels"],
        "score": 4.5,
    }
    assert client.put(name, "dynamo", paper) is True
    assert client.get(name, "dynamo") == paper
    # None removes a property; a nested dict merges into the stored one.
    assert client.put(name, "dynamo", {"score": None, "venue": {"city": "Stevenson"}}) is True
    merged = dict(paper)
    del merged["score"]
    merged["venue"] = {"name": "SOSP", "pages": [205, 220], "city": "Stevenson"}
    assert client.get(name, "dynamo") == merged
    found = client.search(name, {"venue.city": "Stevenson"})
    assert [dict(o) for o in found] == [dict(merged, id="dynamo")]
    assert client.count(name, {"score": Exists()}) == 0
    assert client.count(name, {"score": Missing(), "open": Exists()}) == 1


PATHS = ["title", "year", "doi", "editor", "venue.name", "venue.year", "isbn"]


def random_doc(rng: random.Random) -> Doc:
    doc: Doc = {}
    for path in PATHS:
        if rng.random() < 0.5:
            value: Any = rng.choice(["a", "b", "c"]) if path in ("title", "doi", "venue.name") else rng.randrange(6)
            if rng.random() < 0.1:
                value = rng.randrange(8) / 2
            parent, _, child = path.partition(".")
            if child:
                doc.setdefault(parent, {})[child] = value
            else:
                doc[path] = value
    return doc


# (predicates for the client, the same written as a test on a document)
CHECKS: List[tuple] = [
    ({"year": 3}, lambda d: is_number(lookup(d, "year")) and lookup(d, "year") == 3),
    ({"venue.name": "a"}, lambda d: lookup(d, "venue.name") == "a"),
    ({"venue.year": GreaterEqual(2)}, lambda d: is_number(lookup(d, "venue.year")) and lookup(d, "venue.year") >= 2),
    ({"year": Range(1, 3.5)}, lambda d: is_number(lookup(d, "year")) and 1 <= lookup(d, "year") <= 3.5),
    ({"doi": Exists()}, lambda d: lookup(d, "doi") is not None),
    ({"doi": Exists("editor")}, lambda d: lookup(d, "doi") is not None or lookup(d, "editor") is not None),
    ({"editor": Missing(), "title": "b"}, lambda d: lookup(d, "editor") is None and lookup(d, "title") == "b"),
    ({"venue": Exists(), "isbn": LessThan(3)}, lambda d: "venue" in d and is_number(lookup(d, "isbn")) and lookup(d, "isbn") < 3),
]


@pytest.mark.parametrize("predicates,holds", CHECKS)
def test_searches_equal_a_brute_force_filter(
    admin: tesseradb.Admin,
    client: tesseradb.Client,
    predicates: Dict[str, Any],
    holds: Callable[[Doc], bool],
) -> None:
    name = dynamic_space(admin)
    rng = random.Random(11)
    stored = {f"p{i}": random_doc(rng) for i in range(60)}
    for key, doc in stored.items():
        assert client.put(name, key, doc) is True
    wanted = {k for k, d in stored.items() if holds(d)}
    found = {o["id"] for o in client.search(name, predicates)}
    assert found == wanted
    assert client.count(name, predicates) == len(wanted)
    described = client.search_describe(name, predicates)
    line = next(l for l in described.splitlines() if l.startswith("reads "))
    read, known = int(line.split()[1]), int(line.split()[3])
    assert read <= known
    if wanted:
        assert read >= 1


@pytest.mark.parametrize(
    "doc,error",
    [
        ({"a.b": 1}, tesseradb.WrongTypeError),
        ({"id": "k"}, tesseradb.WrongTypeError),
        ({"x": float("nan")}, tesseradb.WrongTypeError),
        ({"s": {1, 2}}, tesseradb.WrongTypeError),
        ({f"p{i}": i for i in range(300)}, tesseradb.TooLargeError),
    ],
)
def test_bad_documents_change_nothing(
    admin: tesseradb.Admin, client: tesseradb.Client, doc: Doc, error: type
) -> None:
    name = dynamic_space(admin)
    assert client.put(name, "kept", {"title": "kept"}) is True
    with pytest.raises(error):
        client.put(name, "bad", doc)
    with pytest.raises(error):
        client.put(name, "kept", doc)
    assert client.get(name, "kept") == {"title": "kept"}
    assert client.get(name, "bad") is None


def test_sorted_search_ranks_numbers_then_strings(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    name = dynamic_space(admin)
    docs = {"a": {"n": 3}, "b": {"n": 2.5}, "c": {"n": "z"}, "d": {"n": True}, "e": {}, "f": {"n": 10}}
    for key, doc in docs.items():
        assert client.put(name, key, doc) is True
    assert [o["id"] for o in client.sorted_search(name, {}, "n", 10, "min")] == ["b", "a", "f", "c"]
    assert [o["id"] for o in client.sorted_search(name, {}, "n", 2, "max")] == ["c", "f"]


def test_formulas_place_documents_and_searches_find_them(
    admin: tesseradb.Admin, client: tesseradb.Client
) -> None:
    name = dynamic_space(admin)
    by_year = admin.add_formula(name, ["year*4,venue.name", "doi"])
    assert by_year == "year*4,venue.name | doi"
    titled = admin.add_formula(name, ["title"], id="titled")
    assert titled == "titled"
    # Registering the same formula again is a no-op that returns its id.
    assert admin.add_formula(name, ["title"], id="titled") == "titled"
    # Pointer overlays (`&`): stubs of year, and of title with doi; a search reading them
    # reads each match by key.
    pointed = admin.add_formula(name, ["&year", "&title,doi"], id="pointed")
    formulas = admin.describe_space(name)["formulas"]
    assert formulas == {
        by_year: ["year*4,venue.name", "doi"],
        "titled": ["title"],
        "pointed": ["&year", "&title,doi"],
    }

    rng = random.Random(5)
    stored: Dict[str, Doc] = {}
    for i in range(60):
        key, doc = f"p{i}", random_doc(rng)
        formula = rng.choice(["", by_year, titled, pointed, None])
        assert client.put(name, key, doc, formula=formula) is True
        stored[key] = doc
    # A merge that names another formula moves the document; one that names none keeps it.
    assert client.put(name, "p0", {"year": 4}, formula=titled) is True
    stored["p0"]["year"] = 4
    assert client.put(name, "p1", {"title": "c"}) is True
    stored["p1"]["title"] = "c"
    assert client.cond_put(name, "p2", {}, {"doi": "b"}, formula=by_year) is True
    stored["p2"]["doi"] = "b"
    # The Deferred form takes a formula too: p3 moves to the title overlay.
    assert client.async_put(name, "p3", {"title": "a"}, formula=titled).wait() is True
    stored["p3"]["title"] = "a"
    # A title's equality reads one region of the title overlay for the titled documents.
    described = client.search_describe(name, {"title": "a"})
    assert "part: subspace 4 (title) for formulas 'titled': 1 region" in described, described

    for predicates, holds in CHECKS:
        wanted = {k for k, d in stored.items() if holds(d)}
        found = client.search(name, predicates)
        assert {o["id"] for o in found} == wanted, predicates
        # Whole documents, those found through pointers too.
        for o in found:
            assert {p: v for p, v in o.items() if p != "id"} == stored[o["id"]], o
        assert client.count(name, predicates) == len(wanted)
    assert {k: client.get(name, k) for k in stored} == stored

    described = client.search_describe(name, {"year": 3})
    parts = [l for l in described.splitlines() if l.startswith("  part: ")]
    # One part per subspace read: the unispace for "", the year overlay for by_year, the
    # title overlay (which "year" does not narrow) for titled, and the year pointers for
    # pointed.
    assert len(parts) == 4, described
    assert any(repr(by_year) in l and "(year, venue.name)" in l for l in parts), described
    assert any(
        "'pointed'" in l and "(year)" in l and "pointers: each match read by key" in l
        for l in parts
    ), described
    assert sum("pointers" in l for l in parts) == 1, described


def test_bad_formulas_change_nothing(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    name = dynamic_space(admin)
    for overlays in (["year*0"], ["a,b,c,d,e"], ["a,a"], [], [""]):
        with pytest.raises(tesseradb.BadAlterationError):
            admin.add_formula(name, overlays)
    with pytest.raises(TypeError):
        admin.add_formula(name, "title")  # type: ignore[arg-type]
    admin.add_formula(name, ["title"], id="f")
    with pytest.raises(tesseradb.BadAlterationError):
        admin.add_formula(name, ["year"], id="f")
    assert admin.describe_space(name)["formulas"] == {"f": ["title"]}
    assert client.put(name, "k", {"title": "t"}) is True
    with pytest.raises(tesseradb.WrongTypeError):
        client.put(name, "k", {"title": "u"}, formula="nope")
    with pytest.raises(TypeError):
        client.put(name, "k", {"title": "u"}, formula=3)  # type: ignore[arg-type]
    assert client.get(name, "k") == {"title": "t"}
    typed = fresh_name("typed")
    admin.add_space(f"space {typed}\nkey id\nattributes title\n")
    with pytest.raises(tesseradb.WrongTypeError):
        client.put(typed, "k", {"title": "t"}, formula="f")
    assert client.get(typed, "k") is None
