"""Admin.alter_space, Admin.subspaces and Admin.wait_built against a real `tessera dev`.

Searches are checked against a brute-force filter of what the test stored, before, during and
after each change. `test_an_added_subspace_serves_once_built` needs the server-side backfill
(a subspace being built turns serving once every key region is backfilled); the others pass
whether or not a build completes.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Dict, Iterator, List

import pytest

import tesseradb
from tesseradb import Equals, GreaterEqual, LessEqual, Range

from conftest import Server, fresh_name

Objects = Dict[str, Dict[str, Any]]


@pytest.fixture
def fresh_server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.stop()


def make_hotels(admin: tesseradb.Admin, client: tesseradb.Client, count: int = 60) -> tuple:
    """A space of `count` hotels (subspace 1: city, price), and what was stored, by key."""
    name = fresh_name("alt")
    admin.add_space(
        f"space {name}\nkey id\nattributes string city, int stars, int price\n"
        "subspace city, price\ncreate 16 partitions\n"
    )
    rng = random.Random(7)
    stored: Objects = {}
    for i in range(count):
        attrs = {"city": f"c{rng.randrange(5)}", "stars": rng.randrange(6), "price": rng.randrange(300)}
        assert client.put(name, f"h{i}", attrs) is True
        stored[f"h{i}"] = attrs
    return name, stored


# (predicates for the client, the same as a Python test on an object's attributes)
CHECKS: List[tuple] = [
    ({"city": "c1"}, lambda o: o["city"] == "c1"),
    ({"stars": 3}, lambda o: o["stars"] == 3),
    ({"stars": GreaterEqual(4), "price": LessEqual(150)}, lambda o: o["stars"] >= 4 and o["price"] <= 150),
    ({"city": "c2", "price": Range(50, 200)}, lambda o: o["city"] == "c2" and 50 <= o["price"] <= 200),
    ({"price": Equals(17)}, lambda o: o["price"] == 17),
    ({}, lambda o: True),
]


def check_searches(client: tesseradb.Client, space: str, stored: Objects) -> None:
    for predicates, keep in CHECKS:
        found = {o["id"]: {k: v for k, v in o.items() if k != "id"} for o in client.search(space, predicates)}
        expected = {k: v for k, v in stored.items() if keep(v)}
        assert found == expected, predicates
        assert client.count(space, predicates) == len(expected), predicates


def states(admin: tesseradb.Admin, space: str) -> List[tuple]:
    return [(s["id"], s["attributes"], s["state"]) for s in admin.subspaces(space)]


def test_bad_alterations_raise_and_change_nothing(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    name, stored = make_hotels(admin, client, count=10)
    before = admin.subspaces(name)
    assert before == [
        {"id": 0, "attributes": ["id"], "state": "serving"},
        {"id": 1, "attributes": ["city", "price"], "state": "serving"},
    ]
    for change, words in [
        ({"add_subspace": ["nope"]}, "nope"),
        ({"add_subspace": ["id"]}, "id"),
        ({"add_subspace": ["stars", "stars"]}, "stars"),
        ({"add_subspace": ["price", "city"]}, "subspace 1"),
        ({"add_subspace": []}, ""),
        ({"drop_subspace": 0}, "key subspace"),
        ({"drop_subspace": 9}, "no subspace 9"),
    ]:
        with pytest.raises(tesseradb.BadAlterationError) as info:
            admin.alter_space(name, **change)
        e = info.value
        assert (e.status, e.symbol) == (8019, "BADALTER"), change
        assert words in e.message, (change, e.message)
        assert isinstance(e, tesseradb.ClientError)
    with pytest.raises(tesseradb.UnknownSpaceError):
        admin.alter_space("no_such_space", add_subspace=["stars"])
    with pytest.raises(tesseradb.UnknownSpaceError):
        admin.subspaces("no_such_space")
    with pytest.raises(tesseradb.UnknownSpaceError):
        admin.wait_built("no_such_space")
    # Misuse of the API is Python's own errors, and sends nothing.
    with pytest.raises(TypeError):
        admin.alter_space(name)
    with pytest.raises(TypeError):
        admin.alter_space(name, add_subspace=["stars"], drop_subspace=1)
    with pytest.raises(TypeError):
        admin.alter_space(name, add_subspace="stars")
    with pytest.raises(TypeError):
        admin.alter_space(name, drop_subspace="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        admin.alter_space(name, drop_subspace=-1)
    with pytest.raises(ValueError):
        admin.wait_built(name, timeout=-1)
    assert admin.subspaces(name) == before
    assert admin.describe_space(name)["subspace_states"] == ["serving", "serving"]
    assert admin.wait_built(name, timeout=0) == before, "nothing under way: at once"
    check_searches(client, name, stored)
    admin.rm_space(name)


def test_add_and_drop_while_searching(fresh_server: Server) -> None:
    """Passes whether or not the build completes: searches are right while subspace 2 is
    building (or once it serves), and after subspace 1 is dropped."""
    admin = tesseradb.Admin(fresh_server.host, fresh_server.port)
    client = tesseradb.Client(fresh_server.host, fresh_server.port)
    name, stored = make_hotels(admin, client)
    check_searches(client, name, stored)

    assert admin.alter_space(name, add_subspace=["stars"]) == 2
    subspaces = admin.subspaces(name)
    assert [(s["id"], s["attributes"]) for s in subspaces] == [(0, ["id"]), (1, ["city", "price"]), (2, ["stars"])]
    added = subspaces[2]
    assert added["state"] in ("building", "serving")
    if added["state"] == "building":
        assert added["key_regions"] == 16 and 0 <= added["backfilled"] < 16
    assert admin.list_subspaces(name) == [["id"], ["city", "price"], ["stars"]]
    check_searches(client, name, stored)
    # Writes go on: new objects, updates that move objects, deletions.
    for i in range(60, 80):
        stored[f"h{i}"] = {"city": "c9", "stars": i % 6, "price": i}
        client.put(name, f"h{i}", stored[f"h{i}"])
    for i in range(0, 60, 7):
        stored[f"h{i}"]["stars"] = 5
        client.put(name, f"h{i}", {"stars": 5})
    for i in range(1, 60, 11):
        del stored[f"h{i}"]
        assert client.delete(name, f"h{i}") is True
    check_searches(client, name, stored)

    assert admin.alter_space(name, drop_subspace=1) == 1
    assert states(admin, name)[1] == (1, ["city", "price"], "dropped")
    assert admin.describe_space(name)["subspace_states"][:2] == ["serving", "dropped"]
    assert "subspace city, price" not in admin.describe_space(name)["description"]
    check_searches(client, name, stored)
    assert not client.search_describe(name, {"city": "c1", "price": 3}).startswith("subspace 1 ")
    with pytest.raises(tesseradb.BadAlterationError):
        admin.alter_space(name, drop_subspace=1)
    client.put(name, "h2", {"city": "c7"})
    stored["h2"]["city"] = "c7"
    check_searches(client, name, stored)
    assert [o["id"] for o in client.search(name, {"city": "c7"})] == ["h2"]


def test_an_added_subspace_serves_once_built(fresh_server: Server) -> None:
    """Needs the server-side backfill: the added subspace turns serving, wait_built returns
    then, searches use it and find what they should; a dropped id is not reused."""
    admin = tesseradb.Admin(fresh_server.host, fresh_server.port)
    client = tesseradb.Client(fresh_server.host, fresh_server.port)
    name, stored = make_hotels(admin, client)
    assert admin.alter_space(name, add_subspace=["stars"]) == 2
    built = admin.wait_built(name, timeout=60)
    assert [(s["id"], s["state"]) for s in built] == [(0, "serving"), (1, "serving"), (2, "serving")]
    assert all("backfilled" not in s for s in built)
    assert client.search_describe(name, {"stars": 3}).startswith("subspace 2 (stars): 1 of 16 regions")
    check_searches(client, name, stored)

    assert admin.alter_space(name, drop_subspace=1) == 1
    assert admin.alter_space(name, add_subspace=["price", "city"]) == 3, "dropped ids are not reused"
    built = admin.wait_built(name, timeout=60)
    assert states(admin, name) == [
        (0, ["id"], "serving"),
        (1, ["city", "price"], "dropped"),
        (2, ["stars"], "serving"),
        (3, ["price", "city"], "serving"),
    ]
    assert built == admin.subspaces(name)
    assert client.search_describe(name, {"city": "c1", "price": 3}).startswith("subspace 3 (price, city): 1 of ")
    check_searches(client, name, stored)


def test_adaptation_is_turned_on_and_off(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    name, stored = make_hotels(admin, client, count=10)
    assert admin.describe_space(name)["adapt"] is False
    assert admin.adaptations(name) == []
    assert admin.set_adapt(name, True) is True
    described = admin.describe_space(name)
    assert described["adapt"] is True
    assert described["description"].rstrip().endswith("adapt on")
    # Turning it on changes no subspace and logs nothing until the workload says so.
    assert states(admin, name) == [(0, ["id"], "serving"), (1, ["city", "price"], "serving")]
    assert admin.adaptations(name) == []
    assert admin.set_adapt(name, False) is True
    assert admin.describe_space(name)["adapt"] is False
    with pytest.raises(TypeError):
        admin.set_adapt(name, "yes")  # type: ignore[arg-type]
    with pytest.raises(tesseradb.UnknownSpaceError):
        admin.set_adapt("no_such_space", True)
    with pytest.raises(tesseradb.UnknownSpaceError):
        admin.adaptations("no_such_space")
    check_searches(client, name, stored)
