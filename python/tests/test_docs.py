"""Runs the `>>>` examples of docs/python.md, in order, against a fresh `tessera dev`.

The examples connect to 127.0.0.1:1982; the live server's port replaces 1982 in the examples
and in their expected output. Fenced blocks are run as one doctest so that later blocks see
the names earlier ones defined, as a reader typing them into one session would. Blocks fenced
as ```` ```python cluster ```` (the section "Using a cluster") are a session of their own,
run against a fresh `tessera dev --servers 3 --replicas 2`; 1982 is its coordinator.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path
from typing import Iterator, List

import pytest

from conftest import Server

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "python.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
CLUSTER_FENCE = re.compile(r"^```python cluster\n(.*?)^```", re.S | re.M)


def doc_examples(port: int, fence: "re.Pattern[str]" = FENCE) -> str:
    text = DOC.read_text(encoding="utf-8")
    blocks = [b for b in fence.findall(text) if ">>>" in b]
    assert blocks, f"no >>> examples in {DOC}"
    source = "\n".join(block.rstrip("\n") + "\n" for block in blocks)
    # Only the address, never another 1982 that might appear in an example's data.
    return re.sub(r'(127\.0\.0\.1"?(?:, |:))1982\b', rf"\g<1>{port}", source)


@pytest.fixture
def fresh_server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.stop()


def run_examples(source: str, at_least: int) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(source, {"__name__": "python_md"}, "docs/python.md", str(DOC), 0)
    assert len(test.examples) >= at_least
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    failures: List[str] = []
    runner.run(test, out=failures.append)
    assert runner.failures == 0, "".join(failures)


def test_python_md_examples(fresh_server: Server) -> None:
    run_examples(doc_examples(fresh_server.port), at_least=51)


def test_python_md_cluster_examples() -> None:
    cluster = Server("--servers", "3", "--replicas", "2")
    try:
        run_examples(doc_examples(cluster.port, CLUSTER_FENCE), at_least=10)
    finally:
        cluster.stop()
