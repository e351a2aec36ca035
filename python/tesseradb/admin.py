"""``tesseradb.Admin``: spaces and the cluster's configuration (HyperDex's ``hyperdex.admin``)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import _requests as R
from ._native import NativeClient, NativeError
from .client import DEFAULT_HOST, DEFAULT_PORT, _connect
from .errors import ConnectionFailedError, UnknownSpaceError

__all__ = ["Admin"]


def _true(result: Any) -> bool:
    return True


class Admin:
    """Administration of a Tessera server: add and remove spaces, read the configuration."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
        self.host = host
        self.port = port
        self._native: Optional[NativeClient] = _connect(host, port)

    def __repr__(self) -> str:
        return f"tesseradb.Admin({self.host!r}, {self.port!r})"

    def close(self) -> None:
        """Drop the connection. Idempotent."""
        self._native = None

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, op: str, args: Tuple[Any, ...], post: Any = None) -> Any:
        native = self._native
        if native is None:
            raise ConnectionFailedError(8100, "CONNECTION", "the admin connection is closed")
        request: R.Request[Any] = R.Request(op, args, post or (lambda r: r))
        try:
            result = native.call(op, args)
        except NativeError as e:
            return request.failed(e)
        return request.done(result)

    def add_space(self, description: str) -> bool:
        """Create a space from its description (HyperDex's language). True.

        Raises ``BadDescriptionError`` (the message starts with ``line:column``) or
        ``DuplicateSpaceError``."""
        return bool(self._call("add_space", (description,), _true))

    def rm_space(self, space: str) -> bool:
        """Remove a space and all its objects. True; ``UnknownSpaceError`` if there is none."""
        return bool(self._call("rm_space", (space,), _true))

    def list_spaces(self) -> List[str]:
        """The names of the spaces."""
        return [s["name"] for s in self._spaces()]

    def list_subspaces(self, space: str) -> List[List[str]]:
        """The subspaces of a space, each as its list of attribute names, in subspace order:
        the key's subspace first (subspace 0), then those of the description, so index ``i``
        is the subspace ``search_describe`` calls ``subspace i``."""
        for s in self._spaces():
            if s["name"] == space:
                return [[s["key"]]] + [list(sub) for sub in s["subspaces"]]
        raise UnknownSpaceError(8003, "UNKNOWNSPACE", f"no space named {space!r}")

    def describe_space(self, space: str) -> Dict[str, Any]:
        """A space's schema: name, key, key_type, attributes, subspaces, partitions,
        tolerate and its description text."""
        for s in self._spaces():
            if s["name"] == space:
                return dict(s)
        raise UnknownSpaceError(8003, "UNKNOWNSPACE", f"no space named {space!r}")

    def dump_config(self) -> str:
        """The configuration as text: epoch, servers, then each space's description and its
        regions per subspace."""
        config = self._call("config", ())
        spaces = {s["name"]: s for s in self._spaces()}
        lines = [f"epoch {config['epoch']}"]
        for server in config["servers"]:
            lines.append(f"server {server['id']} {server['address']}")
        for space in config["spaces"]:
            regions = " ".join(str(r) for r in space["regions"])
            lines.append(f"space {space['name']} id {space['id']} regions {regions}")
            described = spaces.get(space["name"])
            if described is not None:
                for line in str(described["description"]).strip().splitlines():
                    lines.append(f"  {line}")
        return "\n".join(lines)

    def wait_until_stable(self) -> bool:
        """Return once the server's configuration is fetched. One server is stable as soon as
        it answers, so this is a round trip; with a cluster it will wait for every region to
        have its full chain. True."""
        self._call("config", ())
        return True

    def _spaces(self) -> List[Dict[str, Any]]:
        return list(self._call("list_spaces", ()))
