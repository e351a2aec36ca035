"""Every error path: the ClientError subclass, its status, symbol and message."""

from __future__ import annotations

import re
import socket
from typing import Any, Callable, List

import pytest

import tesseradb
from tesseradb import GreaterThan, Regex

from conftest import Server

INT64_MAX = 2**63 - 1


def test_error_tree() -> None:
    assert tesseradb.HyperDexClientException is tesseradb.ClientError
    e = tesseradb.UnknownSpaceError(8003, "UNKNOWNSPACE", "no space named 'x'")
    assert isinstance(e, tesseradb.ClientError)
    assert (e.status, e.symbol, e.message) == (8003, "UNKNOWNSPACE", "no space named 'x'")
    assert str(e) == "UNKNOWNSPACE (8003): no space named 'x'"


def test_native_errors_map_to_classes() -> None:
    from tesseradb._native import NativeError
    from tesseradb.errors import error_class, from_native

    for symbol, cls in [
        ("NOTFOUND", tesseradb.NotFoundError),
        ("CMPFAIL", tesseradb.CmpFailError),
        ("UNKNOWNSPACE", tesseradb.UnknownSpaceError),
        ("DUPLICATE", tesseradb.DuplicateSpaceError),
        ("UNKNOWNATTR", tesseradb.UnknownAttributeError),
        ("WRONGTYPE", tesseradb.WrongTypeError),
        ("BADDESCRIPTION", tesseradb.BadDescriptionError),
        ("BADPREDICATE", tesseradb.BadPredicateError),
        ("TOOLARGE", tesseradb.TooLargeError),
        ("MALFORMED", tesseradb.MalformedError),
        ("BADPROTOCOL", tesseradb.BadProtocolError),
        ("RECONFIGURE", tesseradb.ReconfigureError),
        ("READONLY", tesseradb.ReadOnlyError),
        ("UNAVAILABLE", tesseradb.UnavailableError),
        ("INTERNAL", tesseradb.InternalError),
        ("TOOFEWSERVERS", tesseradb.TooFewServersError),
        ("TIMEOUT", tesseradb.RequestTimeoutError),
        ("BADALTER", tesseradb.BadAlterationError),
        ("UNAUTHORIZED", tesseradb.UnauthorizedError),
        ("CONNECTION", tesseradb.ConnectionFailedError),
        ("PROTOCOL", tesseradb.ProtocolError),
    ]:
        assert error_class(symbol) is cls
        err = from_native(NativeError(symbol, 8000, "m"))
        assert type(err) is cls and err.symbol == symbol and err.status == 8000
    assert type(from_native(NativeError("SOMETHINGNEW", 8999, "m"))) is tesseradb.ClientError


def test_unknown_space(client: tesseradb.Client) -> None:
    calls: List[Callable[[], Any]] = [
        lambda: client.get("no_such_space", "k"),
        lambda: client.put("no_such_space", "k", {"a": 1}),
        lambda: client.put_if_not_exist("no_such_space", "k", {"a": 1}),
        lambda: client.cond_put("no_such_space", "k", {}, {"a": 1}),
        lambda: client.delete("no_such_space", "k"),
        lambda: client.atomic_add("no_such_space", "k", {"a": 1}),
        lambda: client.count("no_such_space", {}),
        lambda: list(client.search("no_such_space", {})),
        lambda: client.sorted_search("no_such_space", {}, "a", 1, "max"),
        lambda: client.group_del("no_such_space", {}),
        lambda: client.group_atomic_add("no_such_space", {}, {"a": 1}),
        lambda: client.search_describe("no_such_space", {}),
    ]
    for call in calls:
        with pytest.raises(tesseradb.UnknownSpaceError) as info:
            call()
        assert info.value.status == 8003 and info.value.symbol == "UNKNOWNSPACE"
        assert "no_such_space" in info.value.message


def test_unknown_attribute(client: tesseradb.Client, space: str) -> None:
    client.put(space, "o", {"n": 1})
    for call in [
        lambda: client.put(space, "o", {"nope": 1}),
        lambda: client.atomic_add(space, "o", {"nope": 1}),
        lambda: list(client.search(space, {"nope": 1})),
        lambda: client.count(space, {"nope": GreaterThan(1)}),
        lambda: client.cond_put(space, "o", {"nope": 1}, {"n": 2}),
        lambda: client.sorted_search(space, {}, "nope", 1, "max"),
    ]:
        with pytest.raises(tesseradb.UnknownAttributeError) as info:
            call()
        assert info.value.status == 8005 and "nope" in info.value.message


def test_wrong_type_from_the_server(client: tesseradb.Client, space: str) -> None:
    client.put(space, "o", {"n": 1, "s": "x"})
    for call in [
        lambda: client.put(space, "o", {"n": "one"}),
        lambda: client.put(space, "o", {"s": 1}),
        lambda: client.put(space, "o", {"st": {1, 2}}),
        lambda: client.put(space, "o", {"m": {"a": "b"}}),
        lambda: list(client.search(space, {"n": "x"})),
        lambda: list(client.search(space, {"n": Regex("1")})),
    ]:
        with pytest.raises(tesseradb.WrongTypeError) as info:
            call()
        assert info.value.status == 8006 and info.value.symbol == "WRONGTYPE"
    assert client.get_partial(space, "o", ["n", "s"]) == {"n": 1, "s": "x"}


@pytest.mark.parametrize(
    "value", [2**63, -(2**63) - 1, 10**30, True, None, object(), 1j], ids=repr
)
def test_wrong_type_from_python_values(client: tesseradb.Client, space: str, value: Any) -> None:
    with pytest.raises(tesseradb.WrongTypeError) as info:
        client.put(space, "o", {"n": value})
    assert info.value.status == 8006
    assert client.get(space, "o") is None


def test_atomic_operations_of_the_wrong_type_return_false(client: tesseradb.Client, space: str) -> None:
    """An atomic operation that does not fit its attribute cannot apply: False, as in HyperDex."""
    client.put(space, "o", {"n": 1, "s": "x"})
    assert client.atomic_add(space, "o", {"s": 1}) is False  # numbers on a string
    assert client.atomic_add(space, "o", {"n": "one"}) is False  # a string argument for an int
    assert client.string_append(space, "o", {"n": "x"}) is False
    assert client.list_lpush(space, "o", {"st": "x"}) is False
    assert client.atomic_and(space, "o", {"f": 1.0}) is False  # bitwise on a float
    assert client.cond_atomic_add(space, "o", {"n": 1}, {"s": 1}) is False
    assert client.group_atomic_add(space, {}, {"s": 1}) == 0  # applies to no object
    assert client.get_partial(space, "o", ["n", "s"]) == {"n": 1, "s": "x"}


def test_int64_overflow_in_predicates_and_atomics(client: tesseradb.Client, space: str) -> None:
    client.put(space, "o", {"n": INT64_MAX})
    with pytest.raises(tesseradb.WrongTypeError):
        client.count(space, {"n": 2**64})
    with pytest.raises(tesseradb.WrongTypeError):
        client.atomic_add(space, "o", {"n": 2**63})
    assert client.atomic_add(space, "o", {"n": 1}) is False  # overflow in the server: CMPFAIL
    assert client.get_partial(space, "o", ["n"]) == {"n": INT64_MAX}


def test_bad_regex(client: tesseradb.Client, space: str) -> None:
    with pytest.raises(tesseradb.BadPredicateError) as info:
        list(client.search(space, {"s": Regex("(unclosed")}))
    assert info.value.status == 8008


def test_malformed_description_names_line_and_column(admin: tesseradb.Admin) -> None:
    with pytest.raises(tesseradb.BadDescriptionError) as info:
        admin.add_space("space bad_desc\nkey k\nattributes int a\nsubspace b\n")
    assert info.value.status == 8007
    assert re.match(r"^4:\d+: ", info.value.message), info.value.message
    assert '"b"' in info.value.message
    with pytest.raises(tesseradb.BadDescriptionError) as info:
        admin.add_space("space\n")
    assert re.match(r"^\d+:\d+: ", info.value.message), info.value.message
    assert "bad_desc" not in admin.list_spaces()


def test_duplicate_space(admin: tesseradb.Admin, space: str) -> None:
    with pytest.raises(tesseradb.DuplicateSpaceError) as info:
        admin.add_space(f"space {space}\nkey k\nattributes int n\n")
    assert info.value.status == 8004 and info.value.symbol == "DUPLICATE"


def test_rm_unknown_space(admin: tesseradb.Admin) -> None:
    with pytest.raises(tesseradb.UnknownSpaceError):
        admin.rm_space("no_such_space")


def test_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens on port now.
    with pytest.raises(tesseradb.ConnectionFailedError) as info:
        tesseradb.Client("127.0.0.1", port)
    assert info.value.status == 8100 and info.value.symbol == "CONNECTION"
    with pytest.raises(tesseradb.ConnectionFailedError):
        tesseradb.Admin("127.0.0.1", port)


def test_api_misuse_raises_python_errors(client: tesseradb.Client, space: str) -> None:
    with pytest.raises(TypeError):
        client.count(space, [("n", 1)])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.put(space, "o", [("n", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        client.count(space, {"n": (1, 2, 3)})
    with pytest.raises(ValueError):
        client.sorted_search(space, {}, "n", -1, "max")
    with pytest.raises(TypeError):
        tesseradb.LengthEquals(-1)
    with pytest.raises(TypeError):
        tesseradb.Regex(5)  # type: ignore[arg-type]


def test_no_coordinator_is_a_connection_failure() -> None:
    """A cluster whose coordinators are all gone: once the client's retries run out (about
    10 s), an operation that needs a coordinator raises ConnectionFailedError naming them."""
    cluster = Server("--servers", "2", "--replicas", "1")
    try:
        admin = tesseradb.Admin(cluster.host, cluster.port)
        assert admin.list_spaces() == []
    finally:
        cluster.stop()
    with pytest.raises(tesseradb.ConnectionFailedError) as info:
        admin.list_spaces()
    e = info.value
    assert (e.status, e.symbol) == (8100, "CONNECTION")
    assert e.message.startswith("no coordinator of the cluster answered"), e.message
    assert f"127.0.0.1:{cluster.port}" in e.message, e.message
