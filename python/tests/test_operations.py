"""The one table of atomic operations (tesseradb/_operations.py) against what is built from it:
the native module takes exactly the table's operations (besides ``set``), and every generated
method exists on every surface with HyperDex's signature. What each operation does to an object
is checked by test_client.py against a model; this file checks the plumbing of the table.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import tesseradb
import tesseradb.aio
from tesseradb import _native
from tesseradb._operations import OPERATIONS

ROOT = Path(__file__).resolve().parents[2]


def test_the_native_module_takes_exactly_the_tables_operations() -> None:
    natives = [op.native for op in OPERATIONS]
    assert len(set(natives)) == len(natives) == 32
    assert set(_native.FUNCALL_OPS) == set(natives) | {"set"}


def test_every_form_of_every_operation_is_on_every_client() -> None:
    # (class, prefix, what a form answers: the result itself, a Deferred, an aio Answer)
    surfaces = (
        (tesseradb.Client, "", ""),
        (tesseradb.Client, "async_", "Deferred["),
        (tesseradb.aio.Client, "", "Answer["),
    )
    for op in OPERATIONS:
        for cls, prefix, wrapper in surfaces:
            for form, params in (
                (op.name, ["space", "key", "attrs"]),
                (f"cond_{op.name}", ["space", "key", "predicates", "attrs"]),
                (f"group_{op.name}", ["space", "predicates", "attrs"]),
            ):
                method = getattr(cls, prefix + form)
                assert list(inspect.signature(method).parameters)[1:] == params, (cls, form)
                assert not inspect.iscoroutinefunction(method), (cls, form)
                answers = str(inspect.signature(method).return_annotation)
                assert answers.startswith(wrapper), (cls, form, answers)
                if not wrapper:
                    assert not answers.startswith(("Deferred[", "Answer[")), (cls, form, answers)
                doc = " ".join((method.__doc__ or "").split())
                assert op.effect in doc or op.name in doc, (cls, form)


def test_the_generated_sections_are_what_the_table_gives() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen-python-ops.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr


def test_the_native_module_takes_every_operation_of_the_calls_table() -> None:
    from tesseradb._operations import CALLS

    # The table's, the atomic operations' (put, group_update), and the hand-written methods'.
    used = {c.native for c in CALLS} | {"put", "group_update"}
    used |= {"add_subspace", "drop_subspace", "config", "coordinators"}
    assert set(_native.CALL_OPS) == used


def test_every_call_is_on_the_surfaces_its_row_names() -> None:
    from tesseradb._operations import CALLS

    surfaces = {
        "client": (tesseradb.Client, "", ""),
        "async_": (tesseradb.Client, "async_", "Deferred["),
        "aio": (tesseradb.aio.Client, "", "Answer["),
        "admin": (tesseradb.Admin, "", ""),
    }
    for call in CALLS:
        assert call.forms and set(call.forms) <= set(surfaces), call.name
        for form, (cls, prefix, wrapper) in surfaces.items():
            method = getattr(cls, prefix + call.name, None)
            if form not in call.forms:
                # Only the surfaces the row names (Client.search streams, by hand).
                assert method is None or (form, call.name) == ("client", "search"), call.name
                continue
            assert method is not None, (form, call.name)
            answers = str(inspect.signature(method).return_annotation)
            assert answers == f"{wrapper}{call.returns}{']' if wrapper else ''}", (form, answers)
