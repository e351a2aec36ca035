"""Fixtures: a real `tessera dev` server for the session, clients, and fresh space names
(test_cluster.py starts a local cluster with the same `Server` class).

The server binary comes from $TESSERA_BIN (the Makefile sets it to target/debug/tessera), else
../target/debug/tessera relative to python/, else `tessera` on PATH.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

import tesseradb

PYTHON_DIR = Path(__file__).resolve().parent.parent
READY_PREFIX = "tessera dev: ready on "
READY_TIMEOUT_S = 60.0


def tessera_binary() -> str:
    env = os.environ.get("TESSERA_BIN")
    if env:
        return env
    local = PYTHON_DIR.parent / "target" / "debug" / "tessera"
    if local.is_file():
        return str(local)
    on_path = shutil.which("tessera")
    if on_path:
        return on_path
    pytest.exit(
        "no tessera binary: set TESSERA_BIN, run `cargo build -p tessera`, or put tessera on PATH",
        returncode=2,
    )
    raise AssertionError("unreachable")


class Server:
    """One `tessera dev` process on a free port with its own data directory. `extra` are more
    arguments for `tessera dev`: `Server("--servers", "3", "--replicas", "2")` runs a local
    cluster, whose first coordinator is at `host:port`."""

    def __init__(self, *extra: str) -> None:
        self.data_dir = tempfile.mkdtemp(prefix="tesseradb-test-")
        self.stderr_path = self.data_dir + ".stderr"
        self._stderr = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(
            [
                tessera_binary(),
                "dev",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                os.path.join(self.data_dir, "data"),
                "--fsync",
                "never",
                *extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self.host = "127.0.0.1"
        self.port = self._wait_ready()
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()

    def _wait_ready(self) -> int:
        line: List[bytes] = []
        stdout = self.process.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(READY_TIMEOUT_S)
        text = line[0].decode("utf-8", "replace").strip() if line else ""
        if not text.startswith(READY_PREFIX):
            self.stop()
            with open(self.stderr_path, "rb") as f:
                err = f.read().decode("utf-8", "replace")
            raise RuntimeError(f"tessera dev did not start: stdout {text!r}, stderr {err!r}")
        # "ready on HOST:PORT, data in DIR", or "ready on HOST:PORT (C coordinators, ...".
        address = text[len(READY_PREFIX):].split()[0].rstrip(",")
        return int(address.rsplit(":", 1)[1])

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for _ in self.process.stdout:
            pass

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self._stderr.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        try:
            os.remove(self.stderr_path)
        except OSError:
            pass


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def client(server: Server) -> tesseradb.Client:
    return tesseradb.Client(server.host, server.port)


@pytest.fixture(scope="session")
def admin(server: Server) -> tesseradb.Admin:
    return tesseradb.Admin(server.host, server.port)


_names = itertools.count()


def lookup(doc: Dict[str, Any], path: str) -> Optional[Any]:
    """The value at a dotted path of a document as a dict, or None: the tests' own reading of
    a dynamic space's paths."""
    value: Any = doc
    for name in path.split("."):
        if not isinstance(value, dict) or name not in value:
            return None
        value = value[name]
    return value


def is_number(v: Any) -> bool:
    """An int or a float, as document predicates compare numbers (a bool is not one)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def fresh_name(prefix: str = "s") -> str:
    return f"{prefix}{os.getpid()}_{next(_names)}"


@pytest.fixture
def make_space(admin: tesseradb.Admin) -> Callable[..., str]:
    """make_space(body, key="key k") -> a new space's name. body is the description after the
    space and key lines (attributes, subspaces); 8 partitions keep creation quick."""

    def make(body: str, key: str = "key k", partitions: int = 8) -> str:
        name = fresh_name()
        admin.add_space(f"space {name}\n{key}\n{body}\ncreate {partitions} partitions\n")
        return name

    return make


STANDARD = (
    "attributes string s, int n, float f, list(string) l, set(string) st, map(string, int) m, "
    "set(int) si, map(string, string) ms\nsubspace n\nsubspace s"
)


@pytest.fixture
def space(make_space: Callable[..., str]) -> str:
    """A space with one attribute of every kind (s, n, f, l, st, m, si, ms), key k."""
    return make_space(STANDARD)


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False

