"""Runs the `>>>` examples of docs/python.md, in order, against a fresh `tessera dev`.

The examples connect to 127.0.0.1:1982; the live server's port replaces 1982 in the examples
and in their expected output. Fenced blocks are run as one doctest so that later blocks see
the names earlier ones defined, as a reader typing them into one session would.
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


def doc_examples(port: int) -> str:
    text = DOC.read_text(encoding="utf-8")
    blocks = [b for b in FENCE.findall(text) if ">>>" in b]
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


def test_python_md_examples(fresh_server: Server) -> None:
    source = doc_examples(fresh_server.port)
    parser = doctest.DocTestParser()
    test = parser.get_doctest(source, {"__name__": "python_md"}, "docs/python.md", str(DOC), 0)
    assert len(test.examples) > 50
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    failures: List[str] = []
    runner.run(test, out=failures.append)
    assert runner.failures == 0, "".join(failures)
