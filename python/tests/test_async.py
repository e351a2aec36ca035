"""async_<op> handles (HyperDex's Deferred) and the asyncio client tesseradb.aio."""

from __future__ import annotations

import asyncio
from typing import Any, List

import pytest

import tesseradb
import tesseradb.aio
from tesseradb import GreaterEqual, LessThan


def test_deferred_conventions(client: tesseradb.Client, space: str) -> None:
    put = client.async_put(space, "o", {"n": 1, "s": "a"})
    assert isinstance(put, tesseradb.Deferred)
    assert put.wait() is True
    assert put.wait() is True  # again: same outcome
    assert client.async_get(space, "o").wait() == client.get(space, "o")
    assert client.async_get(space, "absent").wait() is None
    assert client.async_get_partial(space, "o", ["n"]).wait() == {"n": 1}
    assert client.async_multi_get(space, ["o", "absent"]).wait() == [client.get(space, "o"), None]
    assert client.async_put_if_not_exist(space, "o", {"n": 2}).wait() is False
    assert client.async_cond_put(space, "o", {"n": 2}, {"s": "b"}).wait() is False
    assert client.async_cond_put(space, "o", {"n": 1}, {"s": "b"}).wait() is True
    assert client.async_cond_put(space, "absent", {"n": 1}, {"s": "b"}).wait() is None
    assert client.async_cond_put_or_create(space, "new", {"n": 1}, {"n": 9}).wait() is True
    assert client.async_atomic_add(space, "o", {"n": 10}).wait() is True
    assert client.async_atomic_add(space, "absent", {"n": 10}).wait() is None
    assert client.async_cond_atomic_add(space, "o", {"n": 0}, {"n": 1}).wait() is False
    assert client.async_count(space, {}).wait() == 2
    assert client.async_group_atomic_add(space, {"n": GreaterEqual(0)}, {"n": 1}).wait() == 2
    assert client.get_partial(space, "o", ["n"]) == {"n": 12}
    top = client.async_sorted_search(space, {}, "n", 1, "max").wait()
    assert [r["k"] for r in top] == ["o"]
    assert client.async_search_describe(space, {"n": 1}).wait().startswith("subspace 1 (n)")
    assert client.async_cond_del(space, "o", {"n": 0}).wait() is False
    assert client.async_delete(space, "o").wait() is True
    assert client.async_delete(space, "o").wait() is None
    assert client.async_cond_del(space, "o", {}).wait() is None
    assert client.async_group_del(space, {}).wait() == 1


def test_deferred_errors_raise_on_every_wait(client: tesseradb.Client) -> None:
    d = client.async_get("no_such_space", "k")
    for _ in range(2):
        with pytest.raises(tesseradb.UnknownSpaceError):
            d.wait()


def test_many_deferreds_in_flight(client: tesseradb.Client, space: str) -> None:
    handles = [client.async_put(space, f"o{i}", {"n": i}) for i in range(500)]
    assert all(h.wait() is True for h in handles)
    gets = [client.async_get(space, f"o{i}") for i in range(500)]
    assert [g.wait()["n"] for g in gets] == list(range(500))  # type: ignore[index]
    assert "Deferred" in repr(gets[0])


def test_aio_client(server: Any, space: str) -> None:
    async def main() -> None:
        c = tesseradb.aio.Client(server.host, server.port)
        assert await c.put(space, "o", {"n": 1, "s": "a"}) is True
        assert await c.get(space, "o") is not None
        assert await c.get(space, "absent") is None
        assert await c.get_partial(space, "o", ["s"]) == {"s": "a"}
        assert await c.multi_get(space, ["absent", "o"]) == [None, await c.get(space, "o")]
        assert await c.put_if_not_exist(space, "o", {"n": 2}) is False
        assert await c.cond_put(space, "o", {"n": 2}, {"s": "b"}) is False
        assert await c.cond_put(space, "absent", {"n": 2}, {"s": "b"}) is None
        assert await c.cond_put(space, "o", {"n": 1}, {"s": "b"}) is True
        assert await c.cond_put_or_create(space, "p", {"n": 1}, {"n": 5}) is True
        assert await c.atomic_add(space, "o", {"n": 2**62}) is True
        assert await c.atomic_add(space, "o", {"n": 2**62}) is False  # overflow
        assert await c.string_append(space, "o", {"s": "c"}) is True
        assert await c.cond_set_add(space, "o", {"s": "bc"}, {"st": "x"}) is True
        assert await c.group_atomic_sub(space, {}, {"n": 1}) == 2
        results = await c.search(space, {"n": GreaterEqual(0)})
        assert isinstance(results, list)
        assert sorted(r["k"] for r in results) == ["o", "p"]
        assert await c.count(space, {"n": LessThan(10)}) == 1
        top = await c.sorted_search(space, {}, "n", 1, "min")
        assert [r["k"] for r in top] == ["p"]
        assert (await c.search_describe(space, {})).startswith("subspace")
        # Many at once on one connection.
        puts = await asyncio.gather(*(c.put(space, f"g{i}", {"n": i}) for i in range(200)))
        assert puts == [True] * 200
        assert await c.cond_del(space, "p", {"n": 0}) is False
        assert await c.delete(space, "p") is True
        assert await c.delete(space, "p") is None
        assert await c.group_del(space, {}) == 201
        with pytest.raises(tesseradb.UnknownSpaceError):
            await c.get("no_such_space", "k")
        with pytest.raises(tesseradb.WrongTypeError):
            await c.put(space, "o", {"n": 2**64})
        c.close()
        with pytest.raises(tesseradb.ConnectionFailedError):
            await c.get(space, "o")

    asyncio.run(main())


def test_aio_connect_and_context_manager(server: Any, space: str) -> None:
    async def main() -> List[Any]:
        async with await tesseradb.aio.connect(server.host, server.port) as c:
            await c.put(space, "o", {"n": 7})
            return [await c.get_partial(space, "o", ["n"]), repr(c)]

    got = asyncio.run(main())
    assert got[0] == {"n": 7} and "aio.Client" in got[1]


def test_aio_connect_refused() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main() -> None:
        await tesseradb.aio.connect("127.0.0.1", port)

    with pytest.raises(tesseradb.ConnectionFailedError):
        asyncio.run(main())


def test_aio_answers_are_futures_started_at_once(
    server: Any, client: tesseradb.Client, space: str
) -> None:
    async def main() -> None:
        c = tesseradb.aio.Client(server.host, server.port)
        answer = c.put(space, "eager", {"n": 1})
        assert isinstance(answer, asyncio.Future) and isinstance(answer, tesseradb.aio.Answer)
        # Started by the call, not by an await: another client sees the object while this
        # coroutine has awaited nothing of it (sleeping between looks lets the drain run).
        for _ in range(500):
            if client.get(space, "eager") is not None:
                break
            await asyncio.sleep(0.01)
        assert client.get(space, "eager")["n"] == 1  # type: ignore[index]
        assert await answer is True and answer.result() is True
        # asyncio takes an Answer wherever it takes a coroutine (asyncio.wait wants tasks, as
        # it does of coroutines).
        assert asyncio.iscoroutine(answer)
        assert (await asyncio.create_task(c.get(space, "eager")))["n"] == 1  # type: ignore[index]
        assert await asyncio.wait_for(c.atomic_add(space, "eager", {"n": 1}), 10) is True
        tasks = {asyncio.create_task(c.get(space, k)) for k in ["eager", "absent"]}
        done, _ = await asyncio.wait(tasks)
        assert sorted(repr(d.result() and d.result()["n"]) for d in done) == ["2", "None"]  # type: ignore[index]
        # Cancelling the task (or the answer) leaves the client working.
        task = asyncio.create_task(c.get(space, "eager"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        cancelled = c.get(space, "eager")
        cancelled.cancel()
        assert cancelled.cancelled()
        assert (await c.get(space, "eager"))["n"] == 2  # type: ignore[index]
        # An error the native module finds before sending is in the answer, not raised by the call.
        refused = c.put(space, "eager", {"n": "not a number"})
        with pytest.raises(tesseradb.WrongTypeError):
            await refused

    asyncio.run(main())


def test_aio_clients_release_their_wake_up_pipes(server: Any, space: str) -> None:
    """Each event loop a client is used on gets a pipe the native side writes to; closing the
    client (or the loop) gives it back, so a process that opens many loops leaks nothing."""
    import gc
    import os

    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def use(close: bool) -> None:
        c = tesseradb.aio.Client(server.host, server.port)
        pending = [c.put(space, f"w{i}", {"n": i}) for i in range(20)]
        if close:
            c.close()  # with answers still in flight: they finish
        assert await asyncio.gather(*pending) == [True] * 20

    asyncio.run(use(True))  # the first client's connections and threads settle
    gc.collect()
    before = open_descriptors()
    for i in range(40):
        asyncio.run(use(close=i % 2 == 0))
    gc.collect()
    assert open_descriptors() <= before + 4, (before, open_descriptors())
