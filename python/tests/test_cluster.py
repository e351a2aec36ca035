"""The public API against a real local cluster: `tessera dev --servers 3 --replicas 2` (one
coordinator, three servers, two replicas of every region). The client connects to the
coordinator and routes by itself: key operations to point leaders, searches to one replica of
every region, merged."""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import tesseradb
import tesseradb.aio
from tesseradb import GreaterEqual, GreaterThan, LessEqual, LessThan
from tesseradb.client import _addresses

from conftest import Server, fresh_name

SERVERS = 3
REPLICAS = 2

HOTELS = "attributes string city, int stars, int price, set(string) tags\nsubspace city, price\nsubspace stars"
CITIES = ["Paris", "Rome", "Oslo", "Lisbon"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Server]:
    s = Server("--servers", str(SERVERS), "--replicas", str(REPLICAS))
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def admin(cluster: Server) -> tesseradb.Admin:
    return tesseradb.Admin(cluster.host, cluster.port)


@pytest.fixture(scope="module")
def client(cluster: Server) -> tesseradb.Client:
    return tesseradb.Client(cluster.host, cluster.port)


def add_space(admin: tesseradb.Admin, body: str = HOTELS, extra: str = "", partitions: int = 8) -> str:
    name = fresh_name("cl")
    assert admin.add_space(f"space {name}\nkey id\n{body}\ncreate {partitions} partitions\n{extra}") is True
    return name


def hotel(i: int) -> Dict[str, Any]:
    return {"city": CITIES[i % 4], "stars": i % 5, "price": 10 * i, "tags": {f"t{i % 3}"}}


@pytest.fixture(scope="module")
def hotels(admin: tesseradb.Admin, client: tesseradb.Client) -> Dict[str, Dict[str, Any]]:
    """A space of 60 hotels h0..h59 (read-only for the tests that use it), and its model."""
    name = add_space(admin)
    model = {f"h{i}": hotel(i) for i in range(60)}
    handles = [client.async_put(name, k, v) for k, v in model.items()]
    assert all(h.wait() is True for h in handles)
    return {"name": name, "model": model}  # type: ignore[dict-item]


def matching(model: Dict[str, Dict[str, Any]], keep: Any) -> Dict[str, Dict[str, Any]]:
    return {k: v for k, v in model.items() if keep(v)}


def as_model(found: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Search results keyed by id, checking that no key came twice."""
    keys = [r["id"] for r in found]
    assert len(keys) == len(set(keys)), f"a key came back twice: {sorted(keys)}"
    return {r["id"]: {a: v for a, v in r.items() if a != "id"} for r in found}


def servers_contacted(description: str) -> int:
    return servers_asked(description)[0]


def servers_asked(description: str) -> Tuple[int, int]:
    """(servers the search asks, servers one replica per region would ask)."""
    m = re.match(
        r"subspace \d+ \([^)]*\): (\d+) of (\d+) regions, (\d+) servers?"
        r"(?: \((\d+) asking one replica per region\))?$",
        description.splitlines()[0],
    )
    assert m, description
    fewest = int(m.group(3))
    return fewest, int(m.group(4) or fewest)


# ---- the cluster, spaces and the configuration ---------------------------------------------


def test_admin_sees_the_cluster(admin: tesseradb.Admin, hotels: Dict[str, Any]) -> None:
    config = admin.dump_config()
    servers = re.findall(r"^server (\d+) (127\.0\.0\.1:\d+)$", config, re.M)
    assert len(servers) == SERVERS, config
    assert len({s[0] for s in servers}) == SERVERS and len({s[1] for s in servers}) == SERVERS
    # The coordinator is not one of the servers.
    assert all(not a.endswith(f":{admin.port}") for _, a in servers)
    assert hotels["name"] in admin.list_spaces()
    # A space that does not say how many failures it tolerates gets the cluster's default.
    assert admin.describe_space(hotels["name"])["tolerate"] == REPLICAS - 1
    assert re.search(rf"^space {hotels['name']} id \d+ regions 8 9 8$", config, re.M), config
    assert admin.wait_until_stable() is True


def test_add_space_with_and_without_tolerate(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    default = add_space(admin, "attributes int n")
    three = add_space(admin, "attributes int n", "tolerate 2 failures\n")
    one = add_space(admin, "attributes int n", "tolerate 0 failures\n")
    for name, tolerate in [(default, 1), (three, 2), (one, 0)]:
        assert admin.describe_space(name)["tolerate"] == tolerate
        section = admin.dump_config().split(f"space {name} id ")[1].split("\nspace ")[0]
        assert f"  tolerate {tolerate} failures" in section, section
        assert client.put(name, "a", {"n": tolerate}) is True
        assert client.get(name, "a") == {"n": tolerate}
        assert client.count(name, {}) == 1
    assert admin.wait_until_stable() is True
    assert admin.rm_space(three) is True
    assert three not in admin.list_spaces()
    # Once every server has the configuration without the space, no client reaches it.
    assert admin.wait_until_stable() is True
    with pytest.raises(tesseradb.UnknownSpaceError):
        client.get(three, "a")
    with pytest.raises(tesseradb.UnknownSpaceError):
        client.put(three, "a", {"n": 1})


def test_more_replicas_than_servers_is_refused(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    before_spaces = sorted(admin.list_spaces())
    before_epoch = admin.dump_config().splitlines()[0]
    name = fresh_name("cl")
    with pytest.raises(tesseradb.TooFewServersError) as info:
        admin.add_space(f"space {name}\nkey id\nattributes int n\ntolerate 5 failures\n")
    e = info.value
    assert isinstance(e, tesseradb.ClientError)
    assert (e.status, e.symbol) == (8016, "TOOFEWSERVERS")
    assert "6" in e.message and str(SERVERS) in e.message, e.message
    # Nothing changed: no space, no new epoch, and the name is still free.
    assert sorted(admin.list_spaces()) == before_spaces
    assert admin.dump_config().splitlines()[0] == before_epoch
    with pytest.raises(tesseradb.UnknownSpaceError):
        client.get(name, "k")
    assert admin.add_space(f"space {name}\nkey id\nattributes int n\ntolerate 2 failures\n") is True
    assert admin.rm_space(name) is True


# ---- keys -----------------------------------------------------------------------------------


def test_key_operations(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    name = add_space(admin)
    keys = [f"k{i}" for i in range(24)]  # enough keys for every server to lead some
    for i, k in enumerate(keys):
        assert client.put(name, k, hotel(i)) is True
    for i, k in enumerate(keys):
        assert client.get(name, k) == hotel(i)
    assert client.get(name, "absent") is None
    assert client.get_partial(name, "k1", ["price"]) == {"price": 10}

    assert client.put_if_not_exist(name, "k1", {"city": "Nowhere"}) is False
    assert client.put_if_not_exist(name, "new", {"city": "Oslo", "price": 5}) is True
    assert client.get(name, "new") == {"city": "Oslo", "stars": 0, "price": 5, "tags": set()}

    assert client.cond_put(name, "k1", {"price": 11}, {"stars": 5}) is False
    assert client.cond_put(name, "k1", {"price": 10}, {"stars": 5}) is True
    assert client.cond_put(name, "absent", {}, {"stars": 5}) is None
    assert client.get_partial(name, "k1", ["stars"]) == {"stars": 5}
    # Moving an object to another region of a subspace (city, price) keeps one copy of it.
    assert client.put(name, "k1", {"city": "Lisbon", "price": 999}) is True
    assert [r["id"] for r in client.search(name, {"price": 999})] == ["k1"]
    assert list(client.search(name, {"price": 10})) == []

    assert client.atomic_add(name, "k2", {"price": 5}) is True
    assert client.atomic_sub(name, "k2", {"stars": 1}) is True
    assert client.atomic_mul(name, "k3", {"price": 3}) is True
    assert client.atomic_div(name, "k3", {"price": 0}) is False
    assert client.atomic_add(name, "absent", {"price": 1}) is None
    assert client.cond_atomic_add(name, "k2", {"price": 0}, {"price": 1}) is False
    assert client.string_append(name, "k2", {"city": "!"}) is True
    assert client.set_add(name, "k2", {"tags": "new"}) is True
    assert client.get(name, "k2") == {"city": "Oslo!", "stars": 1, "price": 25, "tags": {"t2", "new"}}
    assert client.get_partial(name, "k3", ["price"]) == {"price": 90}

    assert client.delete(name, "k4") is True
    assert client.delete(name, "k4") is None
    assert client.get(name, "k4") is None
    assert client.cond_del(name, "k5", {"price": 0}) is False
    assert client.cond_del(name, "k5", {"price": 50}) is True
    assert client.count(name, {}) == len(keys) + 1 - 2


# ---- searches -------------------------------------------------------------------------------


def test_search_returns_each_key_once(client: tesseradb.Client, hotels: Dict[str, Any]) -> None:
    name, model = hotels["name"], hotels["model"]
    assert as_model(list(client.search(name, {}))) == model
    cases: List[Any] = [
        ({"city": "Paris"}, lambda h: h["city"] == "Paris"),
        ({"city": "Rome", "price": LessEqual(300)}, lambda h: h["city"] == "Rome" and h["price"] <= 300),
        ({"price": (100, 250)}, lambda h: 100 <= h["price"] <= 250),
        ({"stars": [GreaterThan(1), LessThan(4)]}, lambda h: 1 < h["stars"] < 4),
        ({"stars": 4, "city": "Oslo"}, lambda h: h["stars"] == 4 and h["city"] == "Oslo"),
        ({"price": GreaterEqual(10_000)}, lambda h: False),
    ]
    for predicates, keep in cases:
        expected = matching(model, keep)
        assert as_model(list(client.search(name, predicates))) == expected, predicates
        assert client.count(name, predicates) == len(expected), predicates


def test_sorted_search(client: tesseradb.Client, hotels: Dict[str, Any]) -> None:
    name, model = hotels["name"], hotels["model"]
    top = client.sorted_search(name, {}, "price", 7, "max")
    assert [h["id"] for h in top] == [f"h{i}" for i in range(59, 52, -1)]
    assert as_model(top) == {h["id"]: model[h["id"]] for h in top}
    paris = client.sorted_search(name, {"city": "Paris"}, "price", 3, "min")
    assert [(h["id"], h["price"]) for h in paris] == [("h0", 0), ("h4", 40), ("h8", 80)]
    everything = client.sorted_search(name, {"stars": GreaterEqual(0)}, "price", 1000, "min")
    assert [h["price"] for h in everything] == sorted(v["price"] for v in model.values())
    assert client.sorted_search(name, {"price": GreaterEqual(10_000)}, "price", 5, "max") == []


def test_group_operations_return_counts(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    name = add_space(admin)
    model = {f"g{i}": hotel(i) for i in range(40)}
    assert all(h.wait() is True for h in [client.async_put(name, k, v) for k, v in model.items()])

    paris = matching(model, lambda h: h["city"] == "Paris")
    assert client.group_atomic_add(name, {"city": "Paris"}, {"price": 1}) == len(paris) == 10
    assert client.group_set_add(name, {"city": "Paris"}, {"tags": "sale"}) == len(paris)
    for k, v in model.items():
        got = client.get(name, k)
        if k in paris:
            assert got == {**v, "price": v["price"] + 1, "tags": v["tags"] | {"sale"}}
        else:
            assert got == v
    # Predicates on the attribute being changed: each match changes once.
    cheap = matching(model, lambda h: h["price"] < 100)
    assert client.group_atomic_mul(name, {"price": LessThan(100)}, {"price": 100}) == len(cheap)
    assert client.count(name, {"price": LessThan(100)}) == 0
    assert client.get_partial(name, "g0", ["price"]) == {"price": 100}  # (0 + 1) * 100

    rome = matching(model, lambda h: h["city"] == "Rome")
    assert client.group_del(name, {"city": "Rome"}) == len(rome)
    assert client.group_del(name, {"city": "Rome"}) == 0
    assert client.count(name, {}) == len(model) - len(rome)
    assert all(client.get(name, k) is None for k in rome)


def test_search_describe_reports_servers(client: tesseradb.Client, hotels: Dict[str, Any]) -> None:
    name = hotels["name"]
    everything = client.search_describe(name, {})
    assert everything.splitlines()[0].startswith("subspace 0 (id): 8 of 8 regions, ")
    # One replica of each of 8 regions, over 3 servers: the objects are spread.
    assert 1 < servers_contacted(everything) <= SERVERS
    one_point = client.search_describe(name, {"city": "Paris", "price": 120})
    assert one_point.splitlines()[0] == "subspace 1 (city, price): 1 of 9 regions, 1 server"
    assert client.async_search_describe(name, {"id": "h1"}).wait().splitlines()[0] == (
        "subspace 0 (id): 1 of 8 regions, 1 server"
    )


def test_objects_spread_over_servers(client: tesseradb.Client, hotels: Dict[str, Any]) -> None:
    """A search of every region asks the fewest servers that hold them all (2 of the 3, each
    region being on 2), where one replica per region would ask all 3; every search still
    returns each object once."""
    name, model = hotels["name"], hotels["model"]
    for _ in range(4):
        assert servers_asked(client.search_describe(name, {})) == (2, SERVERS)
        assert as_model(list(client.search(name, {}))) == model


# ---- asynchronous variants ------------------------------------------------------------------


def test_deferred_operations(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    name = add_space(admin)
    puts = [client.async_put(name, f"d{i}", hotel(i)) for i in range(20)]
    assert [p.wait() for p in puts] == [True] * 20
    assert [client.async_get(name, f"d{i}").wait() for i in range(20)] == [hotel(i) for i in range(20)]
    assert client.async_put_if_not_exist(name, "d0", {}).wait() is False
    assert client.async_cond_put(name, "d1", {"price": 10}, {"stars": 4}).wait() is True
    assert client.async_atomic_add(name, "d1", {"price": 1}).wait() is True
    assert client.async_get_partial(name, "d1", ["stars", "price"]).wait() == {"stars": 4, "price": 11}
    assert client.async_count(name, {"city": "Paris"}).wait() == 5
    assert client.async_group_atomic_add(name, {"city": "Paris"}, {"stars": 1}).wait() == 5
    top = client.async_sorted_search(name, {"city": "Paris"}, "price", 2, "max").wait()
    assert [h["id"] for h in top] == ["d16", "d12"]
    assert client.async_group_del(name, {"city": "Paris"}).wait() == 5
    assert client.async_delete(name, "d1").wait() is True
    assert client.async_count(name, {}).wait() == 14


def test_aio_client(cluster: Server, admin: tesseradb.Admin) -> None:
    name = add_space(admin)

    async def main() -> None:
        async with await tesseradb.aio.connect(cluster.host, cluster.port) as ac:
            assert await asyncio.gather(*(ac.put(name, f"a{i}", hotel(i)) for i in range(20))) == [True] * 20
            assert await ac.get(name, "a3") == hotel(3)
            assert await ac.get(name, "absent") is None
            assert await ac.put_if_not_exist(name, "a3", {}) is False
            assert await ac.cond_put(name, "a3", {"price": 31}, {"stars": 0}) is False
            assert await ac.atomic_sub(name, "a3", {"price": 30}) is True
            found = await ac.search(name, {"city": "Oslo"})
            assert sorted(h["id"] for h in found) == ["a10", "a14", "a18", "a2", "a6"]
            assert await ac.count(name, {"price": LessEqual(50)}) == 6  # a0..a5
            top = await ac.sorted_search(name, {}, "price", 3, "max")
            assert [h["id"] for h in top] == ["a19", "a18", "a17"]
            assert await ac.group_atomic_add(name, {"city": "Rome"}, {"price": 1}) == 5
            assert (await ac.search_describe(name, {})).startswith("subspace 0 (id): 8 of 8 regions")
            assert await ac.group_del(name, {"stars": 0}) == 4
            assert await ac.delete(name, "a3") is True
            assert await ac.count(name, {}) == 15

    asyncio.run(main())


# ---- connecting -----------------------------------------------------------------------------


def test_several_coordinator_addresses(cluster: Server, hotels: Dict[str, Any]) -> None:
    here = f"{cluster.host}:{cluster.port}"
    nowhere = "127.0.0.1:1"  # nothing listens on port 1
    for addresses in [f"{here},{nowhere}", f"{nowhere}, {here}"]:
        with tesseradb.Client(addresses) as c:
            assert c.get(hotels["name"], "h7") == hotels["model"]["h7"]
        with tesseradb.Admin(addresses) as a:
            assert hotels["name"] in a.list_spaces()
    with pytest.raises(tesseradb.ConnectionFailedError):
        tesseradb.Client(nowhere)


def test_address_lists() -> None:
    assert _addresses("127.0.0.1", 1982) == "127.0.0.1:1982"
    assert _addresses("db.example", 7) == "db.example:7"
    assert _addresses("a:1, b ,c:3", 9) == "a:1,b:9,c:3"
    assert _addresses("::1", 1982) == "[::1]:1982"
    assert _addresses("[::1]:5,[fe80::1]", 6) == "[::1]:5,[fe80::1]:6"


def test_concurrent_writers_on_one_key(client: tesseradb.Client, admin: tesseradb.Admin) -> None:
    """Increments from many in-flight requests all land: the point leader orders them."""
    name = add_space(admin)
    assert client.put(name, "counter", {"price": 0}) is True
    rng = random.Random(7)
    steps = [rng.randint(1, 9) for _ in range(100)]
    handles = [client.async_atomic_add(name, "counter", {"price": s}) for s in steps]
    assert all(h.wait() is True for h in handles)
    assert client.get_partial(name, "counter", ["price"]) == {"price": sum(steps)}
