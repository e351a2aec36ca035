"""Tokens from Python (issue "Security and limits"): against `tessera dev --auth FILE`, a client
without a token or with an unknown one cannot connect (``UnauthorizedError``); a read token
reads but its writes are refused and change nothing; an admin token changes spaces; the asyncio
client takes ``token=`` too."""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Iterator

import pytest

import tesseradb
import tesseradb.aio

from conftest import Server

READER = "reader-0123456789abcdef"
WRITER = "writer-0123456789abcdef"
ADMIN = "admin-0123456789abcdef"


@pytest.fixture(scope="module")
def guarded() -> Iterator[Server]:
    fd, path = tempfile.mkstemp(prefix="tesseradb-tokens-")
    with os.fdopen(fd, "w") as f:
        f.write(f"{READER} read\n{WRITER} write\n{ADMIN} admin\n")
    s = Server("--auth", path)
    try:
        yield s
    finally:
        s.stop()
        os.remove(path)


def test_tokens_decide_what_a_client_may_do(guarded: Server) -> None:
    for token in (None, "guessed-0123456789abcdef"):
        with pytest.raises(tesseradb.UnauthorizedError):
            tesseradb.Client(guarded.host, guarded.port, token=token)

    admin = tesseradb.Admin(guarded.host, guarded.port, token=ADMIN)
    admin.add_space("space auth_kv key k attributes int n subspace n")
    writer = tesseradb.Client(guarded.host, guarded.port, token=WRITER)
    writer.put("auth_kv", "a", {"n": 1})

    reader = tesseradb.Client(guarded.host, guarded.port, token=READER)
    assert reader.get("auth_kv", "a") == {"n": 1}
    with pytest.raises(tesseradb.UnauthorizedError) as refused:
        reader.put("auth_kv", "b", {"n": 2})
    assert refused.value.status == 8020 and refused.value.symbol == "UNAUTHORIZED"
    with pytest.raises(tesseradb.UnauthorizedError):
        tesseradb.Admin(guarded.host, guarded.port, token=WRITER).rm_space("auth_kv")
    assert reader.count("auth_kv", {}) == 1

    async def through_asyncio() -> int:
        client = await tesseradb.aio.connect(guarded.host, guarded.port, token=READER)
        with pytest.raises(tesseradb.UnauthorizedError):
            await client.put("auth_kv", "c", {"n": 3})
        return await client.count("auth_kv", {})

    assert asyncio.run(through_asyncio()) == 1
    admin.rm_space("auth_kv")
