"""TLS from Python (issue "Security and limits"): against `tessera dev --tls-cert ...`, with an
authority made by `tessera certs`, a client given ``tls_ca=`` reads and writes; one without it
is told the port speaks TLS; one trusting another authority cannot connect; the asyncio client
takes ``tls_ca=`` too."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from typing import Iterator, Tuple

import pytest

import tesseradb
import tesseradb.aio

from conftest import Server, tessera_binary


def make_certs(directory: str) -> None:
    subprocess.run(
        [tessera_binary(), "certs", directory, "--host", "127.0.0.1", "--host", "localhost"],
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def tls() -> Iterator[Tuple[Server, str, str]]:
    ours, theirs = tempfile.mkdtemp(prefix="tesseradb-tls-"), tempfile.mkdtemp(prefix="tesseradb-tls-")
    make_certs(ours)
    make_certs(theirs)
    s = Server(
        "--tls-cert",
        os.path.join(ours, "127.0.0.1.pem"),
        "--tls-key",
        os.path.join(ours, "127.0.0.1.key"),
        "--tls-ca",
        os.path.join(ours, "ca.pem"),
    )
    try:
        yield s, os.path.join(ours, "ca.pem"), os.path.join(theirs, "ca.pem")
    finally:
        s.stop()
        shutil.rmtree(ours)
        shutil.rmtree(theirs)


def test_a_client_trusting_the_authority_works_over_tls(tls: Tuple[Server, str, str]) -> None:
    server, ca, _ = tls
    admin = tesseradb.Admin(server.host, server.port, tls_ca=ca)
    admin.add_space("space tls_kv key k attributes int n subspace n")
    client = tesseradb.Client(server.host, server.port, tls_ca=ca)
    client.put("tls_kv", "a", {"n": 1})
    assert client.get("tls_kv", "a") == {"n": 1}
    assert [o["k"] for o in client.search("tls_kv", {"n": 1})] == ["a"]

    async def through_asyncio() -> int:
        c = await tesseradb.aio.connect(server.host, server.port, tls_ca=ca)
        await c.put("tls_kv", "b", {"n": 2})
        return await c.count("tls_kv", {})

    assert asyncio.run(through_asyncio()) == 2
    admin.rm_space("tls_kv")


def test_plain_and_untrusting_clients_are_refused(tls: Tuple[Server, str, str]) -> None:
    server, _, other_ca = tls
    with pytest.raises(tesseradb.BadProtocolError) as plain:
        tesseradb.Client(server.host, server.port)
    assert "speaks TLS" in str(plain.value)
    with pytest.raises(tesseradb.ConnectionFailedError) as untrusted:
        tesseradb.Client(server.host, server.port, tls_ca=other_ca)
    assert "UnknownIssuer" in str(untrusted.value)
    with pytest.raises(ValueError):
        tesseradb.Client(server.host, server.port, tls_ca="/nonexistent/ca.pem")
