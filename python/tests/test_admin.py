"""tesseradb.Admin: spaces and the configuration."""

from __future__ import annotations

import re
from typing import Any

import pytest

import tesseradb

from conftest import fresh_name


def test_space_lifecycle(admin: tesseradb.Admin, client: tesseradb.Client) -> None:
    name = fresh_name("adm")
    description = (
        f"space {name}\nkey id\nattributes string city, int stars, int price\n"
        "subspace city, price\nsubspace stars\ncreate 16 partitions\ntolerate 0 failures\n"
    )
    assert admin.add_space(description) is True
    assert name in admin.list_spaces()
    assert admin.list_subspaces(name) == [["id"], ["city", "price"], ["stars"]]
    schema = admin.describe_space(name)
    assert schema["key"] == "id" and schema["partitions"] == 16
    assert [a[0] for a in schema["attributes"]] == ["city", "stars", "price"]
    assert client.put(name, "h1", {"city": "Paris", "stars": 4, "price": 120}) is True

    config = admin.dump_config()
    assert config.splitlines()[0].startswith("epoch ")
    assert re.search(rf"^server \d+ 127\.0\.0\.1:{admin.port}$", config, re.M), config
    assert f"space {name} id " in config
    assert "  subspace city, price" in config

    assert admin.wait_until_stable() is True
    assert admin.rm_space(name) is True
    assert name not in admin.list_spaces()
    with pytest.raises(tesseradb.UnknownSpaceError):
        client.get(name, "h1")
    with pytest.raises(tesseradb.UnknownSpaceError):
        admin.list_subspaces(name)
    with pytest.raises(tesseradb.UnknownSpaceError):
        admin.describe_space(name)
    # The name can be used again, and the new space starts empty.
    assert admin.add_space(description) is True
    assert client.get(name, "h1") is None
    admin.rm_space(name)


def test_admin_close(server: Any) -> None:
    with tesseradb.Admin(server.host, server.port) as a:
        assert isinstance(a.list_spaces(), list)
    with pytest.raises(tesseradb.ConnectionFailedError):
        a.list_spaces()
