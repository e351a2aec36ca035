"""``tesseradb.Admin``: spaces and the cluster's configuration (HyperDex's ``hyperdex.admin``)."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _requests as R
from ._native import NativeClient, NativeError
from .client import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_TIMEOUT, _connect
from .errors import ConnectionFailedError, UnavailableError, UnknownSpaceError, from_native

__all__ = ["Admin"]


def _true(result: Any) -> bool:
    return True


class Admin:
    """Administration of a Tessera server or cluster (``host`` and ``port`` as for
    ``tesseradb.Client``: with a cluster, any coordinator, or several comma-separated): add,
    remove and alter spaces, read the configuration. ``token`` and ``tls_ca``: as for
    ``tesseradb.Client``; changing spaces needs a token with the admin role."""

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        token: Optional[str] = None,
        tls_ca: Optional[str] = None,
    ) -> None:
        self.host = host
        self.port = port
        self._native: Optional[NativeClient] = _connect(host, port, timeout, token, tls_ca)

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

    def alter_space(
        self,
        space: str,
        *,
        add_subspace: Optional[Sequence[str]] = None,
        drop_subspace: Optional[int] = None,
    ) -> int:
        """Add or drop a subspace of a live space; reads, writes and searches go on. Give
        exactly one of ``add_subspace`` (its attributes' names) or ``drop_subspace`` (its id,
        as ``subspaces`` lists it). Returns the subspace's id.

        An added subspace gets the next unused id and is built from the objects already
        stored: every write goes through it from now on, but searches use it only once it is
        built (``subspaces`` shows it ``"building"`` with its progress, then ``"serving"``;
        ``wait_built`` waits for that). One subspace is built at a time per space. A dropped
        subspace serves no search and no write goes through it. Ids are stable: a dropped
        subspace keeps its id, which is never reused, and a space uses at most 32 ids over its
        life.

        Raises ``BadAlterationError`` when the change cannot apply (nothing changed),
        ``UnknownSpaceError``, and ``TypeError`` / ``ValueError`` for bad arguments."""
        if (add_subspace is None) == (drop_subspace is None):
            raise TypeError("alter_space takes exactly one of add_subspace=[...] or drop_subspace=N")
        if add_subspace is not None:
            if isinstance(add_subspace, (str, bytes)) or not all(isinstance(a, str) for a in add_subspace):
                raise TypeError("add_subspace is a list of attribute names, e.g. ['city', 'price']")
            return int(self._call("add_subspace", (space, list(add_subspace))))
        if isinstance(drop_subspace, bool) or not isinstance(drop_subspace, int):
            raise TypeError("drop_subspace is a subspace id (an int), as subspaces() lists it")
        if not 0 <= drop_subspace <= 0xFFFF:
            raise ValueError(f"no subspace id is {drop_subspace}")
        return int(self._call("drop_subspace", (space, drop_subspace)))

    def add_formula(self, space: str, overlays: Sequence[str], *, id: Optional[str] = None) -> str:
        """Register a compression formula in a dynamic space and return its id once documents
        can use it (``put(..., formula=id)``). Each overlay is properties joined by ``,``
        with optional weights, e.g. ``["year*4,venue.name", "doi"]``: a document of the
        formula is placed in every overlay, at its properties' coordinates, instead of the
        unispace. Without ``id`` the id is the overlays' text joined by ``" | "``.

        Overlays the space lacks become subspaces that serve at once (no document uses the
        formula yet). Registering the same formula again returns its id.

        Raises ``BadAlterationError`` (a malformed overlay, more properties than the space's
        dimensions, an id taken by other overlays, too many formulas; nothing changed),
        ``UnknownSpaceError``, and ``TypeError`` for bad arguments."""
        if isinstance(overlays, (str, bytes)) or not all(isinstance(o, str) for o in overlays):
            raise TypeError('overlays is a list of overlays, e.g. ["year*4,venue.name", "doi"]')
        if id is not None and not isinstance(id, str):
            raise TypeError(f"id is a str or None, not {type(id).__name__}")
        return str(self._call("add_formula", (space, list(overlays), id)))

    def set_adapt(self, space: str, on: bool) -> bool:
        """Turn adaptation on or off (as ``adapt on`` in a description): whether Tessera
        re-subspaces the space itself as its workload changes. With it on, the coordinators'
        leader (or ``tessera dev``) scores the workload the space served each period with the
        advisor, and once another configuration is predicted at least 20 % faster several
        periods running, logs the decision (``adaptations``) and adds, builds and drops
        subspaces to get there. True; ``UnknownSpaceError`` if there is no such space."""
        if not isinstance(on, bool):
            raise TypeError("on is True or False")
        return bool(self._call("set_adapt", (space, on), _true))

    def adaptations(self, space: str) -> List[Dict[str, Any]]:
        """The adaptations decided for ``space``, oldest first (the last 16 are kept), each
        ``{"epoch", "from", "to", "predicted_from_ops_s", "predicted_to_ops_s",
        "observations", "period_s"}``: ``from`` and ``to`` are lists of subspaces, each a
        list of attribute names (the key subspace left out). ``UnknownSpaceError`` if there is
        no such space."""
        return list(self._call("adaptations", (space,)))

    def subspaces(self, space: str) -> List[Dict[str, Any]]:
        """Every subspace of a space, freshly fetched, by id (the key's, 0, first; dropped ones
        keep their place): ``{"id", "attributes", "state"}`` with ``state`` one of
        ``"serving"``, ``"building"`` (being built: also ``"backfilled"`` of ``"key_regions"``
        key regions so far) or ``"dropped"``. ``UnknownSpaceError`` if there is none."""
        return list(self._call("subspaces", (space,)))

    def wait_built(self, space: str, timeout: Optional[float] = 60.0) -> List[Dict[str, Any]]:
        """Wait until no subspace of ``space`` is being built, and return its ``subspaces``
        then: the subspace added last serves searches (or was dropped before it was built).
        Raises ``RequestTimeoutError`` if a build is still under way after ``timeout``
        seconds (``None``: wait as long as it takes; the build itself goes on), saying how far
        it got; ``UnknownSpaceError`` if the space is (or gets) removed."""
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout >= 0):
            raise ValueError(f"timeout must be a number of seconds >= 0 or None, not {timeout!r}")
        return list(self._call("wait_built", (space, None if timeout is None else float(timeout))))

    def list_spaces(self) -> List[str]:
        """The names of the spaces."""
        return [s["name"] for s in self._spaces()]

    def list_subspaces(self, space: str) -> List[List[str]]:
        """The subspaces of a space, each as its list of attribute names, in subspace order:
        the key's subspace first (subspace 0), then those of the description and those added
        by ``alter_space``, so index ``i`` is the subspace ``search_describe`` calls
        ``subspace i``. A dropped subspace keeps its place (ids are stable): ``subspaces``
        says which are serving, building or dropped."""
        for s in self._spaces():
            if s["name"] == space:
                return [[s["key"]]] + [list(sub) for sub in s["subspaces"]]
        raise UnknownSpaceError(8003, "UNKNOWNSPACE", f"no space named {space!r}")

    def describe_space(self, space: str) -> Dict[str, Any]:
        """A space's schema: name, key, key_type, attributes, subspaces, subspace_states
        (one per subspace id, the key's first: ``"serving"``, ``"building"`` or
        ``"dropped"``), partitions, tolerate, adapt (whether Tessera picks its subspaces, see
        ``set_adapt``) and its description text (which leaves out the dropped subspaces)."""
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

    def wait_until_stable(self, timeout: Optional[float] = 30.0) -> bool:
        """Return True once the configuration is stable, as far as a client can tell.

        * A single server (``tessera dev``): once it has answered with its configuration;
          one server owns every region, so it is always stable.
        * A cluster: once (1) the coordinator that is the Raft leader answers, (2) this admin
          has fetched a configuration at least as new as the one that leader had applied when
          asked, (3) in that configuration every region of every subspace of every space has
          its full replica set (``tolerate + 1`` distinct servers, all registered), and
          (4) every server of that configuration answers with that configuration or a newer
          one. So an ``add_space`` or ``rm_space`` acknowledged before the call is then
          known to every server: a request about a removed space fails with
          ``UnknownSpaceError`` everywhere, whichever client sends it.

        Until then a server may briefly act on the configuration before the change (servers
        follow the coordinators within moments). Raises ``UnavailableError`` if the cluster is
        not stable within ``timeout`` seconds (``None``: wait as long as it takes), saying
        what was missing; ``ConnectionFailedError`` if no coordinator answers at all (after the
        client's retries, about 10 s)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.01
        servers: Dict[str, NativeClient] = {}  # connections to each server, for this call
        while True:
            missing = self._unstable(servers)
            if missing is None:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                raise UnavailableError(
                    8014, "UNAVAILABLE", f"the configuration is not stable after {timeout} s: {missing}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _unstable(self, servers: Dict[str, NativeClient]) -> Optional[str]:
        """None when stable (see wait_until_stable), else what is missing."""
        # The leader's view first, then the configuration: fetched after, it is at least as new.
        coordinators = list(self._call("coordinators", ()))
        config = self._call("config", ())
        if not config["cluster"]:
            return None
        answered = [c for c in coordinators if "error" not in c]
        leaders = [c for c in answered if c["leader"] is not None and c["leader"] == c["id"]]
        if not leaders:
            errors = "; ".join(f"{c['address']}: {c['error']}" for c in coordinators if "error" in c)
            return "no coordinator leader answered" + (f" ({errors})" if errors else "")
        leader = max(leaders, key=lambda c: c["term"])
        epoch = config["epoch"]
        if epoch < leader["epoch"]:
            return f"this admin has epoch {epoch}, the coordinator leader {leader['epoch']}"
        ids = {s["id"] for s in config["servers"]}
        for space in config["spaces"]:
            wanted = space["tolerate"] + 1
            for subspace, regions in enumerate(space["replicas"]):
                for region, replicas in enumerate(regions):
                    if len(set(replicas)) != wanted or not ids.issuperset(replicas):
                        return (
                            f"space {space['name']} subspace {subspace} region {region} has replicas "
                            f"{replicas}, not {wanted} distinct registered servers"
                        )
        for server in config["servers"]:
            address = server["address"]
            try:
                # A connection to a server alone: its own configuration, not the coordinators'.
                native = servers.get(address)
                if native is None:
                    native = servers[address] = NativeClient(address)
                has = native.call("config", ())["epoch"]
            except NativeError as e:
                servers.pop(address, None)
                return f"server {server['id']} at {address} does not answer ({from_native(e)})"
            if has < epoch:
                return f"server {server['id']} at {address} has epoch {has}, not {epoch} yet"
        return None

    def _spaces(self) -> List[Dict[str, Any]]:
        return list(self._call("list_spaces", ()))
