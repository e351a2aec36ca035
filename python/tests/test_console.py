"""The web console, in a real headless browser (Debian's chromium driven by Playwright), against a
local cluster of 3 servers holding a space of hotels: the page shows the servers, the space's
regions with the objects they hold, a search's box and the regions it reads, an update's chain
and the live throughput; and, for a space of skewed prices, its statistics and which subspaces
are cut by the data, before and after `tessera recut`. The expectations come from the data the
test wrote, not from the console's own code. Also the console's data API refusing bad
requests, and its statistics, without a browser.

Skips, saying why, where no browser can be started (no chromium, or Playwright not installed).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import tesseradb
from conftest import Server, fresh_name, tessera_binary

REPLICAS = 2
OBJECTS = 120
CITIES = ["Paris", "Rome", "Oslo", "Lisbon", "Porto", "Bergen"]
BROWSER_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def hotel(i: int) -> Dict[str, Any]:
    return {"city": CITIES[i % len(CITIES)], "price": (37 * i) % 1000}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Tuple[Server, str]]:
    s = Server("--servers", "3", "--replicas", str(REPLICAS), "--http", "127.0.0.1:0")
    try:
        with open(s.stderr_path, encoding="utf-8") as f:
            found = re.search(r"console at (http://[0-9.:]+/)", f.read())
        assert found, "tessera dev did not say where its console is"
        yield s, found.group(1)
    finally:
        s.stop()


@pytest.fixture(scope="module")
def hotels(cluster: Tuple[Server, str]) -> str:
    server, _ = cluster
    name = fresh_name("console")
    admin = tesseradb.Admin(server.host, server.port)
    assert admin.add_space(
        f"space {name}\nkey id\nattributes string city, int price\n"
        "subspace city, price\ncreate 16 partitions\n"
    )
    client = tesseradb.Client(server.host, server.port)
    for i in range(OBJECTS):
        assert client.put(name, f"h{i}", hotel(i)) is True
    return name


SKEWED = 300


@pytest.fixture(scope="module")
def skewed(cluster: Tuple[Server, str]) -> Tuple[str, List[Dict[str, Any]]]:
    """A space of SKEWED listings with log-normal prices (most of them in the first of the price
    subspace's 16 equal slices) and ratings in tenths; its name and the objects written."""
    server, _ = cluster
    name = fresh_name("skewed")
    admin = tesseradb.Admin(server.host, server.port)
    assert admin.add_space(
        f"space {name}\nkey id\nattributes int price, float rating\n"
        "subspace price\ncreate 16 partitions\n"
    )
    rng = random.Random(32)
    listings = [
        {"price": int(math.exp(rng.gauss(8.0, 1.2))), "rating": round(rng.uniform(1.0, 5.0), 1)}
        for _ in range(SKEWED)
    ]
    client = tesseradb.Client(server.host, server.port)
    for i, listing in enumerate(listings):
        assert client.put(name, f"l{i}", listing) is True
    return name, listings


def get_json(url: str) -> Tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def test_the_api_refuses_bad_requests_clearly(cluster: Tuple[Server, str], hotels: str) -> None:
    _, base = cluster
    cases: List[Tuple[str, int, str]] = [
        ("api/regions", 400, "give the parameter space"),
        ("api/regions?space=nosuchspace", 404, "no space named"),
        (f"api/regions?space={hotels}&subspace=7", 400, "subspaces 0 to 1"),
        (f"api/regions?space={hotels}&subspace=x", 400, "subspace"),
        (f"api/search?space={hotels}&q=price%3Ccheap", 400, "price"),
        (f"api/search?space={hotels}&q=nosuch%3D1", 400, "nosuch"),
        (f"api/search?space={hotels}&q=city%3D%22Paris", 400, "quote"),
        (f"api/chain?space={hotels}", 400, "give the parameter key"),
        (f"api/chain?space={hotels}&key=h1&set=%7Bnot+json", 400, "JSON"),
        (f"api/chain?space={hotels}&key=h1&set=%7B%22price%22%3A%22x%22%7D", 400, "price"),
        (f"api/chain?space={hotels}&key=nobody&delete=1", 400, "nothing to delete"),
        ("api/nothing", 404, "no /api/nothing"),
        ("api/regions?space=%FF", 400, "UTF-8"),
        ("api/statistics", 400, "give the parameter space"),
        ("api/statistics?space=", 404, 'no space named ""'),
        ("api/statistics?space=nosuchspace", 404, 'no space named "nosuchspace"'),
        ("api/statistics?space=%FF", 400, "UTF-8"),
    ]
    for path, status, words in cases:
        got, body = get_json(base + path)
        assert (got, words in body.get("error", "")) == (status, True), (path, got, body)
    # Only GET is served; a POST changes nothing and says so.
    request = urllib.request.Request(base + "api/cluster", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 405


def test_the_statistics_api_counts_what_was_written(
    cluster: Tuple[Server, str], skewed: Tuple[str, List[Dict[str, Any]]]
) -> None:
    _, base = cluster
    name, listings = skewed
    status, body = get_json(base + f"api/statistics?space={name}")
    assert status == 200, body
    assert (body["key_regions_counted"], body["key_regions"]) == (16, 16), body
    by_name = {a["attribute"]: a for a in body["attributes"]}
    assert sorted(by_name) == ["id", "price", "rating"]
    prices = [x["price"] for x in listings]
    price = by_name["price"]
    assert (price["type"], price["count"]) == ("int", SKEWED)
    assert (price["min"], price["max"]) == (min(prices), max(prices))
    quantiles = price["quantiles"]
    assert min(prices) <= quantiles["p1"] <= quantiles["p50"] <= quantiles["p99"] <= max(prices)
    assert abs(quantiles["p50"] - sorted(prices)[SKEWED // 2]) < 0.2 * sorted(prices)[SKEWED // 2]
    ratings = [x["rating"] for x in listings]
    rating = by_name["rating"]
    # Distinct values are counted exactly up to 128.
    assert (rating["count"], rating["distinct"]) == (SKEWED, len(set(ratings)))
    assert (rating["min"], rating["max"]) == (min(ratings), max(ratings))
    assert by_name["id"]["count"] == SKEWED and "quantiles" not in by_name["id"]


def browser_or_skip() -> str:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the console's browser test needs Playwright: pip install -r python/requirements-test.txt")
    chromium = os.environ.get("TESSERA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip(
            "the console's browser test needs chromium: apt-get install chromium (Debian), "
            "or give its path in TESSERA_CHROMIUM"
        )
    return chromium


def cells(page: Any) -> List[Dict[str, str]]:
    return page.eval_on_selector_all(
        "#grid rect.cell",
        "rects => rects.map(r => ({objects: r.dataset.objects, regions: r.dataset.regions,"
        " replicas: r.dataset.replicas, marked: r.dataset.marked}))",
    )


def test_the_console_in_a_browser(cluster: Tuple[Server, str], hotels: str) -> None:
    chromium = browser_or_skip()
    from playwright.sync_api import sync_playwright

    server, base = cluster
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=BROWSER_FLAGS)
        try:
            page = browser.new_page()
            page.goto(base)

            # Cluster health: the three servers, available, and the coordinator.
            page.wait_for_function("document.querySelectorAll('#servers tr').length === 4")
            states = page.eval_on_selector_all("#servers td.state-available", "tds => tds.length")
            assert states == 3
            assert page.inner_text("#mode") == "cluster"
            assert not page.is_visible("#login")  # no --auth: no token asked for

            # The space's key subspace: every object once, in regions held by REPLICAS servers each.
            page.click(f"#spaces button:text-is('{hotels}')")
            page.wait_for_function(
                f"document.getElementById('grid-title').textContent.startsWith('{hotels}, subspace 0')"
            )
            page.wait_for_function(
                "[...document.querySelectorAll('#grid rect.cell')].every(r => r.dataset.objects !== '')"
            )
            key_cells = cells(page)
            assert sum(int(c["objects"]) for c in key_cells) == OBJECTS
            for c in key_cells:
                for replica_set in c["replicas"].split():
                    assert len(set(replica_set.split(">"))) == REPLICAS

            # A search for cheap hotels: drawn as a box over the city-price subspace; the regions
            # marked as read hold every match, and fewer than all regions are read.
            page.fill("#search-input", "price<200")
            page.click("#search-button")
            page.wait_for_selector("#search-result")
            page.wait_for_selector("#box")
            assert page.eval_on_selector("#subspace", "s => s.value") == "1"
            page.select_option("#axis-x", "0")
            page.select_option("#axis-y", "1")
            page.wait_for_function(
                "[...document.querySelectorAll('#grid rect.cell')].every(r => r.dataset.objects !== '')"
            )
            grid = cells(page)
            assert sum(int(c["objects"]) for c in grid) == OBJECTS
            matches = sum(1 for i in range(OBJECTS) if hotel(i)["price"] < 200)
            marked = [c for c in grid if c["marked"] == "1"]
            assert 0 < len(marked) < len(grid)
            assert sum(int(c["objects"]) for c in marked) >= matches
            summary = page.inner_text("#search-result")
            regions_read = sum(len(c["regions"].split(",")) for c in marked)
            assert f"{regions_read} of " in summary, summary

            # An update's chain, nothing written: an unchanged object's chain is its key region's
            # replicas then its city-price region's, REPLICAS each; a new key's the same.
            for key, change, operation in (("h3", "{}", "update"), ("nobody", '{"price": 5}', "insert")):
                page.fill("#chain-key", key)
                page.fill("#chain-set", change)
                page.click("#chain-button")
                page.wait_for_function(
                    f"document.getElementById('chain-summary').textContent.startsWith('{operation}')"
                )
                hops = page.eval_on_selector_all("#chain-hops li", "lis => lis.map(l => l.textContent)")
                assert len(hops) == 2 * REPLICAS, hops
                assert all("subspace 0" in h for h in hops[:REPLICAS]), hops
                assert all("subspace 1" in h for h in hops[REPLICAS:]), hops
            assert tesseradb.Client(server.host, server.port).get(hotels, "nobody") is None

            # Live throughput: writes while the page watches show as operations per second, more
            # than the page's own few requests a second could make.
            client = tesseradb.Client(server.host, server.port)
            stop = threading.Event()

            def write() -> None:
                i = 0
                while not stop.is_set():
                    client.put(hotels, f"live{i % 50}", hotel(i))
                    i += 1

            writer = threading.Thread(target=write, daemon=True)
            writer.start()
            try:
                page.wait_for_function(
                    "Number(document.getElementById('throughput').dataset.last || 0) > 100", timeout=15000
                )
            finally:
                stop.set()
                writer.join(timeout=30)
        finally:
            browser.close()


def test_the_console_asks_for_a_token(tmp_path: Any) -> None:
    """A daemon started with --auth serves the page to anyone, but its data only with a token
    of the file: the page asks for one, refuses a wrong one, and shows the cluster once given
    a read token."""
    chromium = browser_or_skip()
    from playwright.sync_api import sync_playwright

    reader, writer = "console-reader-0123456789", "console-writer-0123456789"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{reader} read\n{writer} admin\n")
    server = Server("--auth", str(tokens), "--http", "127.0.0.1:0")
    try:
        with open(server.stderr_path, encoding="utf-8") as f:
            base = re.search(r"console at (http://[0-9.:]+/)", f.read()).group(1)  # type: ignore[union-attr]
        name = fresh_name("guarded")
        admin = tesseradb.Admin(server.host, server.port, token=writer)
        assert admin.add_space(f"space {name} key id attributes int n")
        with urllib.request.urlopen(base, timeout=30) as response:
            assert response.status == 200  # the page, without a token
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "api/cluster", timeout=30)
        assert refused.value.code == 401
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=BROWSER_FLAGS)
            try:
                page = browser.new_page()
                page.goto(base)
                page.wait_for_selector("#login", state="visible")
                page.wait_for_function("document.getElementById('error').textContent.includes('token')")
                assert page.eval_on_selector_all("#servers td", "tds => tds.length") == 0
                page.fill("#token", "console-reader-0123456780")  # one character off
                page.click("#token-button")
                page.wait_for_function(
                    "document.getElementById('error').textContent.includes('unknown token')"
                )
                assert page.is_visible("#login")
                page.fill("#token", reader)
                page.click("#token-button")
                page.wait_for_selector(f"#spaces button:text-is('{name}')")
                assert not page.is_visible("#login")
                assert page.eval_on_selector_all("#servers td.state-available", "tds => tds.length") == 1
                assert page.inner_text("#error") == ""
            finally:
                browser.close()
    finally:
        server.stop()


def statistics_rows(page: Any) -> Dict[str, Dict[str, str]]:
    """The statistics table as shown: for each attribute, its cells by column heading."""
    head = page.eval_on_selector_all("#statistics th", "ths => ths.map(t => t.textContent)")
    rows = page.eval_on_selector_all(
        "#statistics tr[data-attribute]", "trs => trs.map(r => [...r.cells].map(c => c.textContent))"
    )
    return {row[0]: dict(zip(head, row)) for row in rows}


def subspace_lines(page: Any) -> List[Dict[str, str]]:
    return page.eval_on_selector_all(
        "#subspaces div",
        "ds => ds.map(d => ({subspace: d.dataset.subspace, state: d.dataset.state,"
        " cut: d.dataset.cutByData, text: d.textContent}))",
    )


def test_the_console_shows_statistics_and_recuts(
    cluster: Tuple[Server, str], skewed: Tuple[str, List[Dict[str, Any]]]
) -> None:
    chromium = browser_or_skip()
    from playwright.sync_api import sync_playwright

    server, base = cluster
    name, listings = skewed
    prices = [x["price"] for x in listings]
    ratings = [x["rating"] for x in listings]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=BROWSER_FLAGS)
        try:
            page = browser.new_page()
            page.goto(base)
            page.click(f"#spaces button:text-is('{name}')")

            # The statistics, beside the regions: every object counted, the extremes written.
            page.wait_for_selector("#statistics tr[data-attribute='price']")
            shown = statistics_rows(page)
            assert sorted(shown) == ["id", "price", "rating"]
            price, rating = shown["price"], shown["rating"]
            assert (price["count"], price["min"], price["max"]) == (str(SKEWED), str(min(prices)), str(max(prices)))
            assert min(prices) <= float(price["p1"]) <= float(price["p50"]) <= float(price["p99"]) <= max(prices)
            assert int(rating["count"]) == SKEWED
            assert (float(rating["min"]), float(rating["max"])) == (min(ratings), max(ratings))
            assert page.inner_text("#statistics-note").startswith("16 of 16 key regions counted")

            # Before the re-cut: the price subspace is cut into equal slices, nothing is built.
            page.wait_for_selector("#subspaces div[data-subspace='1']")
            lines = subspace_lines(page)
            assert [(x["subspace"], x["state"], x["cut"]) for x in lines] == [
                ("0", "serving", "false"),
                ("1", "serving", "false"),
            ], lines
            assert "price" in lines[1]["text"] and "equal slices" in lines[1]["text"], lines
            assert not page.is_visible("#build")

            # A build under way is shown as the server words it (the answer is the real one,
            # with a build added: a real re-cut of SKEWED objects is over before the page looks).
            progress = "re-cutting subspace 1: 3 of 16 key regions backfilled (into subspace 2)"

            def with_build(route: Any) -> None:
                answer = route.fetch().json()
                answer["build"] = progress
                route.fulfill(json=answer)

            regions_api = re.compile(r"/api/regions\?")
            page.route(regions_api, with_build)
            page.wait_for_function(
                f"document.getElementById('build').textContent === {json.dumps(progress)}", timeout=15000
            )
            assert page.is_visible("#build")
            page.unroute(regions_api)
            page.wait_for_selector("#build", state="hidden", timeout=15000)

            # `tessera recut` (the CLI): the price subspace is built again at the prices'
            # quantiles and takes the old one's place; the page shows it cut by data.
            run = subprocess.run(
                [tessera_binary(), "--addr", f"{server.host}:{server.port}", "recut", name],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert run.returncode == 0, run.stderr
            recut = json.loads(run.stdout.splitlines()[0])
            assert (recut["action"], recut["subspace"], recut["replaced_by"]) == ("recut", 1, 2), recut
            page.wait_for_function(
                "document.querySelector(\"#subspaces div[data-subspace='2'][data-cut-by-data='true']\") !== null",
                timeout=15000,
            )
            lines = subspace_lines(page)
            assert [(x["subspace"], x["state"], x["cut"]) for x in lines] == [
                ("0", "serving", "false"),
                ("1", "dropped", "false"),
                ("2", "serving", "true"),
            ], lines
            assert "price" in lines[2]["text"] and "cut by data" in lines[2]["text"], lines
            assert not page.is_visible("#build")

            # Re-cutting moves no object in or out: the statistics read again say the same.
            page.eval_on_selector("#statistics", "t => t.replaceChildren()")
            page.click("#statistics-button")
            page.wait_for_selector("#statistics tr[data-attribute='price']")
            again = statistics_rows(page)["price"]
            assert (again["count"], again["min"], again["max"]) == (price["count"], price["min"], price["max"])
        finally:
            browser.close()
