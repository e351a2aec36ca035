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


def test_the_http_port_speaks_https_with_the_daemons_certificate() -> None:
    """With --tls-cert, the console and /metrics are served over HTTPS with the daemon's
    certificate (so a token sent to them, --auth here, never crosses in clear); plain HTTP to
    the port is told to use https."""
    import re
    import ssl
    import urllib.error
    import urllib.request

    certs = tempfile.mkdtemp(prefix="tesseradb-tls-")
    make_certs(certs)
    reader = "https-reader-0123456789"
    tokens = os.path.join(certs, "tokens")
    with open(tokens, "w") as f:
        f.write(f"{reader} read\n")
    s = Server(
        "--tls-cert", os.path.join(certs, "127.0.0.1.pem"),
        "--tls-key", os.path.join(certs, "127.0.0.1.key"),
        "--tls-ca", os.path.join(certs, "ca.pem"),
        "--auth", tokens,
        "--http", "127.0.0.1:0",
    )
    try:
        with open(s.stderr_path, encoding="utf-8") as f:
            found = re.search(r"console at https://127\.0\.0\.1:(\d+)/", f.read())
        assert found, "the daemon did not say it serves its console over https"
        port = found.group(1)
        trusting = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
        metrics = urllib.request.Request(
            f"https://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {reader}"}
        )
        with urllib.request.urlopen(metrics, context=trusting, timeout=30) as response:
            assert response.status == 200
            assert b"tessera_epoch" in response.read()
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/", context=trusting, timeout=30) as page:
            assert b"<title>Tessera console</title>" in page.read()
        with pytest.raises(urllib.error.HTTPError) as plain:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30)
        assert plain.value.code == 400 and b"use https://" in plain.value.read()
        with pytest.raises(urllib.error.URLError) as untrusted:
            urllib.request.urlopen(f"https://127.0.0.1:{port}/", context=ssl.create_default_context(), timeout=30)
        assert "CERTIFICATE_VERIFY_FAILED" in str(untrusted.value)
    finally:
        s.stop()
        shutil.rmtree(certs)
