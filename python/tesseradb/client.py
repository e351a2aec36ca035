"""``tesseradb.Client``: HyperDex's Python client API over Tessera's native client.

Return conventions (HyperDex's): ``True`` on success, ``None`` when the key has no object,
``False`` when a condition fails or an atomic operation cannot apply to the stored value
(integer overflow, division by zero); anything else raises a ``ClientError`` subclass.
Every call blocks the calling thread only: the native module releases the GIL while it waits,
so threads may share one ``Client``.
"""

from __future__ import annotations

from typing import Any, Dict, Generic, Iterator, List, Mapping, Optional, Sequence, TypeVar

from . import _requests as R
from ._native import NativeClient, NativeDeferred, NativeError
from ._requests import Attributes, Key, Object
from .errors import ClientError, ConnectionFailedError, from_native
from .predicates import Predicates, to_native

__all__ = ["Client", "Deferred", "DEFAULT_HOST", "DEFAULT_PORT"]

T = TypeVar("T")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 1982


class Deferred(Generic[T]):
    """An operation started by an ``async_<op>`` method. ``wait()`` blocks until it is done
    and returns what ``<op>`` would have returned (or raises what it would have raised);
    calling it again gives the same outcome."""

    __slots__ = ("_native", "_request", "_done", "_result", "_error")

    def __init__(self, native: NativeDeferred, request: R.Request[T]) -> None:
        self._native = native
        self._request = request
        self._done = False
        self._result: Optional[T] = None
        self._error: Optional[BaseException] = None

    def wait(self) -> T:
        if not self._done:
            try:
                self._result = self._request.done(self._native.wait())
            except NativeError as e:
                try:
                    self._result = self._request.failed(e)
                except BaseException as error:  # the ClientError it stands for
                    self._error = error
            self._done = True
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]

    def __repr__(self) -> str:
        state = "done" if self._done else "pending"
        return f"<tesseradb.Deferred {self._request.op} {state}>"


def _addresses(host: str, port: int) -> str:
    """The address list the native client connects to: ``host`` is a host name or IP address
    (then ``port`` is its port), or one or more comma-separated addresses, each ``host`` or
    ``host:port`` (``port`` for those without one). IPv6 addresses may be bare (``::1``) or in
    brackets (``[::1]:1982``)."""
    out = []
    for entry in (e.strip() for e in host.split(",")):
        if not entry:
            continue
        if entry.startswith("["):
            out.append(entry if "]:" in entry else f"{entry}:{port}")
        elif entry.count(":") == 0:
            out.append(f"{entry}:{port}")
        elif entry.count(":") == 1:
            out.append(entry)
        else:  # a bare IPv6 address
            out.append(f"[{entry}]:{port}")
    return ",".join(out)


#: Seconds a request may take, retries included, unless a client is given another ``timeout``.
DEFAULT_TIMEOUT = 10.0


def _connect(
    host: str,
    port: int,
    timeout: float = DEFAULT_TIMEOUT,
    token: Optional[str] = None,
    tls_ca: Optional[str] = None,
    read_from: str = "any",
) -> NativeClient:
    try:
        return NativeClient(_addresses(host, port), timeout, token, tls_ca, read_from=read_from)
    except NativeError as e:
        raise from_native(e) from None


class Client:
    """A connection to a Tessera server (``tessera dev`` listens on 127.0.0.1:1982) or cluster.

    ``host`` may also name a cluster's coordinators: one ``host:port`` or several
    comma-separated (``"10.0.0.1:1982,10.0.0.2:1982"``; ``port`` is used for entries without
    one). Given a coordinator, the client routes each key's requests to the key's point leader
    and sends a search to one replica of every region it crosses; the API is the same.
    Connecting fetches the configuration; failing to connect raises ``ConnectionFailedError``.

    ``timeout`` is how long a request may take, retries included (10 s): past it the request
    raises ``RequestTimeoutError``, whose message says whether a write may still have been
    applied. In a cluster a read waits at most 2 s for one server before trying another.

    ``token`` is for daemons started with ``--auth``: one of the tokens of their token file,
    whose role (read, write or admin) decides what this client may do. An operation its role
    does not allow, or any operation without a token, raises ``UnauthorizedError``.

    ``tls_ca`` is for daemons serving TLS (``--tls-cert``): the path of the PEM certificate
    authority that signed their certificates (``tessera certs`` makes one). Without it, a TLS
    daemon refuses the client; with it, a daemon whose certificate the authority did not sign,
    or that does not name the host dialed, raises ``ConnectionFailedError``.

    ``read_from`` is which replica a get asks in a cluster: ``"any"`` (the default), any
    complete replica of the key's region, in turn, or ``"leader"``, the key's point leader
    only; both linearizable (standalone they are the same). Anything else raises
    ``ValueError`` before connecting.
    """

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        token: Optional[str] = None,
        tls_ca: Optional[str] = None,
        read_from: str = "any",
    ) -> None:
        self.host = host
        self.port = port
        self._native: Optional[NativeClient] = _connect(
            host, port, timeout, token, tls_ca, read_from
        )

    def __repr__(self) -> str:
        return f"tesseradb.Client({self.host!r}, {self.port!r})"

    def close(self) -> None:
        """Drop the connection (operations still in flight finish). Idempotent."""
        self._native = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _client(self) -> NativeClient:
        native = self._native
        if native is None:
            raise ConnectionFailedError(8100, "CONNECTION", "the client is closed")
        return native

    def _run(self, request: R.Request[T]) -> T:
        try:
            result = self._client().call(request.op, request.args)
        except NativeError as e:
            return request.failed(e)
        return request.done(result)

    def _submit(self, request: R.Request[T]) -> Deferred[T]:
        try:
            native = self._client().submit(request.op, request.args)
        except NativeError as e:
            raise from_native(e) from None
        return Deferred(native, request)

    # By hand: an iterator (HyperDex's search is one), over the native module's search_iter,
    # which makes each object a Python dict as it is taken; so no async_search either.
    def search(self, space: str, predicates: Predicates) -> Iterator[Object]:
        """Every object matching predicates, key included, one at a time (the search is
        complete, every server answered, before the first).

        Errors (an unknown space or attribute...) are raised by the call or by the first
        ``next()``."""
        try:
            stream = self._client().search_iter(space, to_native(predicates))
        except NativeError as e:
            raise from_native(e) from None
        return _stream(stream)

    # Every other operation, in its three forms, is written from its row of _operations.py by
    # scripts/gen-python-ops.py: the blocking method runs the request _requests builds for it.
    # BEGIN GENERATED by scripts/gen-python-ops.py from _operations.py: Client's operations. Do not edit.
    def get(self, space: str, key: Key) -> Optional[Object]:
        """The object's attributes (without the key), or None if the key has no object."""
        return self._run(R.get(space, key))

    def get_partial(self, space: str, key: Key, attrs: Sequence[str]) -> Optional[Object]:
        """Only the named attributes of the object, or None if the key has no object."""
        return self._run(R.get_partial(space, key, attrs))

    def multi_get(self, space: str, keys: Sequence[Key]) -> List[Optional[Object]]:
        """The objects of ``keys``, in their order, None for a key with no object. Each key is
        read as ``get`` reads it (in a cluster, each point leader is asked once for all its
        keys); the keys are not read as one snapshot."""
        return self._run(R.multi_get(space, keys))

    def multi_put(
        self, space: str, items: Mapping[Key, Attributes]
    ) -> Dict[Key, Optional[ClientError]]:
        """Put each key's attributes as ``put`` would. Not a transaction: each put succeeds or
        fails on its own (a failed one changes nothing of its key, the others stay stored).
        Returns, per key, None when it was stored, else the ``ClientError`` that refused it;
        a malformed argument raises before anything is written."""
        return self._run(R.multi_put(space, items))

    def put(
        self, space: str, key: Key, attrs: Attributes, *, formula: Optional[str] = None
    ) -> Optional[bool]:
        """Create the object, or update the attributes given (others keep their values). True.

        ``formula`` (a dynamic space only) places the document by that compression formula
        (an id ``Admin.add_formula`` returned; ``""`` for the default, the unispace); the
        document keeps it until a put names another."""
        return self._run(R.put(space, key, attrs, formula))

    def put_if_not_exist(
        self, space: str, key: Key, attrs: Attributes, *, formula: Optional[str] = None
    ) -> Optional[bool]:
        """Create the object: True, or False if the key already has one (``formula`` as for
        ``put``)."""
        return self._run(R.put_if_not_exist(space, key, attrs, formula))

    def cond_put(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
        *,
        formula: Optional[str] = None,
    ) -> Optional[bool]:
        """Update an existing object if it matches predicates: True, False if it does not, None
        if absent. ``formula`` as for ``put``."""
        return self._run(R.cond_put(space, key, predicates, attrs, formula))

    def cond_put_or_create(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
        *,
        formula: Optional[str] = None,
    ) -> Optional[bool]:
        """Create the object, or update it if it matches predicates: True, or False if it does
        not. ``formula`` as for ``put``."""
        return self._run(R.cond_put_or_create(space, key, predicates, attrs, formula))

    def delete(self, space: str, key: Key) -> Optional[bool]:
        """Delete the object: True, or None if the key had none."""
        return self._run(R.delete(space, key))

    def cond_del(self, space: str, key: Key, predicates: Predicates) -> Optional[bool]:
        """Delete the object if it matches predicates: True, False if it does not, None if
        absent."""
        return self._run(R.cond_del(space, key, predicates))

    def group_del(self, space: str, predicates: Predicates) -> int:
        """Delete every object matching predicates; the number deleted."""
        return self._run(R.group_del(space, predicates))

    def count(self, space: str, predicates: Predicates) -> int:
        """The number of objects matching predicates."""
        return self._run(R.count(space, predicates))

    def sorted_search(
        self, space: str, predicates: Predicates, sort_by: str, limit: int, maxmin: str
    ) -> List[Object]:
        """At most limit matching objects (key included), by sort_by: largest first for "max",
        smallest first for "min"."""
        return self._run(R.sorted_search(space, predicates, sort_by, limit, maxmin))

    def get_by_range(
        self, space: str, start: Key, end: Key, limit: Optional[int] = None
    ) -> List[Object]:
        """The objects whose keys lie in [start, end), key included, smallest key first, at
        most ``limit`` of them. A space with ``placement ordered`` reads only the regions the
        range overlaps; any other reads every region. Like a search, each object is a version
        it had; the range is not one snapshot."""
        return self._run(R.get_by_range(space, start, end, limit))

    def get_by_tags(self, space: str, tags: Sequence[str]) -> List[Object]:
        """The objects (key included, in key order) whose tags include every one of ``tags``:
        the set(string) attribute of the space's ``placement tagged``, or its only set(string)
        attribute. A tagged space reads only the regions of the tags' cells."""
        return self._run(R.get_by_tags(space, tags))

    def search_describe(self, space: str, predicates: Predicates) -> str:
        """How a search for predicates would run: the subspace chosen, the regions and servers
        it contacts."""
        return self._run(R.search_describe(space, predicates))

    def atomic_add(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr += value (int or float). True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_add", attrs))

    def cond_atomic_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """atomic_add, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_add", attrs, predicates))

    def group_atomic_add(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_add on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_add", attrs))

    def atomic_sub(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr -= value. True; None if absent; False if it
        cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_sub", attrs))

    def cond_atomic_sub(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """atomic_sub, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_sub", attrs, predicates))

    def group_atomic_sub(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_sub on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_sub", attrs))

    def atomic_mul(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr *= value. True; None if absent; False if it
        cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_mul", attrs))

    def cond_atomic_mul(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """atomic_mul, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_mul", attrs, predicates))

    def group_atomic_mul(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_mul on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_mul", attrs))

    def atomic_div(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr /= value (ints truncate toward zero). True; None
        if absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_div", attrs))

    def cond_atomic_div(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """atomic_div, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_div", attrs, predicates))

    def group_atomic_div(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_div on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_div", attrs))

    def atomic_mod(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr %= value (ints: sign of the dividend, as in C).
        True; None if absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_mod", attrs))

    def cond_atomic_mod(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """atomic_mod, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_mod", attrs, predicates))

    def group_atomic_mod(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_mod on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_mod", attrs))

    def atomic_and(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr &= value (ints). True; None if absent; False if
        it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_and", attrs))

    def cond_atomic_and(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """atomic_and, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_and", attrs, predicates))

    def group_atomic_and(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_and on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_and", attrs))

    def atomic_or(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr |= value (ints). True; None if absent; False if
        it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_or", attrs))

    def cond_atomic_or(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """atomic_or, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_or", attrs, predicates))

    def group_atomic_or(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_or on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_or", attrs))

    def atomic_xor(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr ^= value (ints). True; None if absent; False if
        it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_xor", attrs))

    def cond_atomic_xor(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """atomic_xor, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_xor", attrs, predicates))

    def group_atomic_xor(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_xor on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_xor", attrs))

    def atomic_min(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr = min(attr, value). True; None if absent; False
        if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_min", attrs))

    def cond_atomic_min(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """atomic_min, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_min", attrs, predicates))

    def group_atomic_min(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_min on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_min", attrs))

    def atomic_max(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr = max(attr, value). True; None if absent; False
        if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_max", attrs))

    def cond_atomic_max(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """atomic_max, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_max", attrs, predicates))

    def group_atomic_max(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_max on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_max", attrs))

    def string_prepend(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr = value + attr (strings). True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "string_prepend", attrs))

    def cond_string_prepend(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """string_prepend, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "string_prepend", attrs, predicates))

    def group_string_prepend(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """string_prepend on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "string_prepend", attrs))

    def string_append(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr = attr + value (strings). True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "string_append", attrs))

    def cond_string_append(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """string_append, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "string_append", attrs, predicates))

    def group_string_append(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """string_append on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "string_append", attrs))

    def list_lpush(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: insert value at the front of the list. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "list_lpush", attrs))

    def cond_list_lpush(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """list_lpush, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "list_lpush", attrs, predicates))

    def group_list_lpush(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """list_lpush on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "list_lpush", attrs))

    def list_rpush(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: append value to the list. True; None if absent; False
        if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "list_rpush", attrs))

    def cond_list_rpush(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """list_rpush, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "list_rpush", attrs, predicates))

    def group_list_rpush(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """list_rpush on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "list_rpush", attrs))

    def set_add(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: add the element value to the set. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "set_add", attrs))

    def cond_set_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """set_add, only if the object matches predicates: True; False if not (or it cannot apply);
        None if absent."""
        return self._run(R.atomic(space, key, "set_add", attrs, predicates))

    def group_set_add(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """set_add on every object matching predicates; the number changed (objects where it cannot
        apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "set_add", attrs))

    def set_remove(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: remove the element value from the set. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "set_remove", attrs))

    def cond_set_remove(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """set_remove, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "set_remove", attrs, predicates))

    def group_set_remove(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """set_remove on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "set_remove", attrs))

    def set_union(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: add every element of the set value. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "set_union", attrs))

    def cond_set_union(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """set_union, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "set_union", attrs, predicates))

    def group_set_union(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """set_union on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "set_union", attrs))

    def set_intersect(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: keep only the elements also in the set value. True;
        None if absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "set_intersect", attrs))

    def cond_set_intersect(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """set_intersect, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "set_intersect", attrs, predicates))

    def group_set_intersect(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """set_intersect on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "set_intersect", attrs))

    def map_add(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: insert or overwrite every entry of the dict value.
        True; None if absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_add", attrs))

    def cond_map_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_add, only if the object matches predicates: True; False if not (or it cannot apply);
        None if absent."""
        return self._run(R.atomic(space, key, "map_add", attrs, predicates))

    def group_map_add(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_add on every object matching predicates; the number changed (objects where it cannot
        apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_add", attrs))

    def map_remove(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: remove the entry whose key is value (absent is fine).
        True; None if absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_remove", attrs))

    def cond_map_remove(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_remove, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_remove", attrs, predicates))

    def group_map_remove(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_remove on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_remove", attrs))

    def map_atomic_add(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] += v for every k: v of the dict value (absent
        counts as 0). True; None if absent; False if it cannot apply (overflow, division by
        zero)."""
        return self._run(R.atomic(space, key, "map_num_add", attrs))

    def cond_map_atomic_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_atomic_add, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_add", attrs, predicates))

    def group_map_atomic_add(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_atomic_add on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_add", attrs))

    def map_atomic_sub(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] -= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_sub", attrs))

    def cond_map_atomic_sub(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_atomic_sub, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_sub", attrs, predicates))

    def group_map_atomic_sub(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_atomic_sub on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_sub", attrs))

    def map_atomic_mul(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] *= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_mul", attrs))

    def cond_map_atomic_mul(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_atomic_mul, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_mul", attrs, predicates))

    def group_map_atomic_mul(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_atomic_mul on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_mul", attrs))

    def map_atomic_div(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] /= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_div", attrs))

    def cond_map_atomic_div(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_atomic_div, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_div", attrs, predicates))

    def group_map_atomic_div(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_atomic_div on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_div", attrs))

    def map_atomic_mod(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] %= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_mod", attrs))

    def cond_map_atomic_mod(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_atomic_mod, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_mod", attrs, predicates))

    def group_map_atomic_mod(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_atomic_mod on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_mod", attrs))

    def map_atomic_and(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] &= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_and", attrs))

    def cond_map_atomic_and(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_atomic_and, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_and", attrs, predicates))

    def group_map_atomic_and(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_atomic_and on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_and", attrs))

    def map_atomic_or(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] |= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_or", attrs))

    def cond_map_atomic_or(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_atomic_or, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_or", attrs, predicates))

    def group_map_atomic_or(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_atomic_or on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_or", attrs))

    def map_atomic_xor(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] ^= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_xor", attrs))

    def cond_map_atomic_xor(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_atomic_xor, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_xor", attrs, predicates))

    def group_map_atomic_xor(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_atomic_xor on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_xor", attrs))

    def map_atomic_min(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] = min(map[k], v) for every k: v. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_min", attrs))

    def cond_map_atomic_min(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_atomic_min, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_min", attrs, predicates))

    def group_map_atomic_min(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_atomic_min on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_min", attrs))

    def map_atomic_max(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] = max(map[k], v) for every k: v. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_max", attrs))

    def cond_map_atomic_max(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_atomic_max, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_max", attrs, predicates))

    def group_map_atomic_max(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_atomic_max on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_max", attrs))

    def map_string_prepend(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] = s + map[k] for every k: s. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_string_prepend", attrs))

    def cond_map_string_prepend(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_string_prepend, only if the object matches predicates: True; False if not (or it
        cannot apply); None if absent."""
        return self._run(R.atomic(space, key, "map_string_prepend", attrs, predicates))

    def group_map_string_prepend(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> int:
        """map_string_prepend on every object matching predicates; the number changed (objects where
        it cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_string_prepend", attrs))

    def map_string_append(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] = map[k] + s for every k: s. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_string_append", attrs))

    def cond_map_string_append(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Optional[bool]:
        """map_string_append, only if the object matches predicates: True; False if not (or it
        cannot apply); None if absent."""
        return self._run(R.atomic(space, key, "map_string_append", attrs, predicates))

    def group_map_string_append(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_string_append on every object matching predicates; the number changed (objects where
        it cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_string_append", attrs))
    # END GENERATED: Client's operations

    # async_<op>: the same request, started now, finished by .wait() (HyperDex's Deferred).
    # BEGIN GENERATED by scripts/gen-python-ops.py from _operations.py: Client's async_ operations. Do not edit.
    def async_get(self, space: str, key: Key) -> Deferred[Optional[Object]]:
        """get, started now; ``.wait()`` gives its result."""
        return self._submit(R.get(space, key))

    def async_get_partial(
        self, space: str, key: Key, attrs: Sequence[str]
    ) -> Deferred[Optional[Object]]:
        """get_partial, started now; ``.wait()`` gives its result."""
        return self._submit(R.get_partial(space, key, attrs))

    def async_multi_get(self, space: str, keys: Sequence[Key]) -> Deferred[List[Optional[Object]]]:
        """multi_get, started now; ``.wait()`` gives its result."""
        return self._submit(R.multi_get(space, keys))

    def async_put(
        self, space: str, key: Key, attrs: Attributes, *, formula: Optional[str] = None
    ) -> Deferred[Optional[bool]]:
        """put, started now; ``.wait()`` gives its result."""
        return self._submit(R.put(space, key, attrs, formula))

    def async_put_if_not_exist(
        self, space: str, key: Key, attrs: Attributes, *, formula: Optional[str] = None
    ) -> Deferred[Optional[bool]]:
        """put_if_not_exist, started now; ``.wait()`` gives its result."""
        return self._submit(R.put_if_not_exist(space, key, attrs, formula))

    def async_cond_put(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
        *,
        formula: Optional[str] = None,
    ) -> Deferred[Optional[bool]]:
        """cond_put, started now; ``.wait()`` gives its result."""
        return self._submit(R.cond_put(space, key, predicates, attrs, formula))

    def async_cond_put_or_create(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
        *,
        formula: Optional[str] = None,
    ) -> Deferred[Optional[bool]]:
        """cond_put_or_create, started now; ``.wait()`` gives its result."""
        return self._submit(R.cond_put_or_create(space, key, predicates, attrs, formula))

    def async_delete(self, space: str, key: Key) -> Deferred[Optional[bool]]:
        """delete, started now; ``.wait()`` gives its result."""
        return self._submit(R.delete(space, key))

    def async_cond_del(
        self, space: str, key: Key, predicates: Predicates
    ) -> Deferred[Optional[bool]]:
        """cond_del, started now; ``.wait()`` gives its result."""
        return self._submit(R.cond_del(space, key, predicates))

    def async_group_del(self, space: str, predicates: Predicates) -> Deferred[int]:
        """group_del, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_del(space, predicates))

    def async_count(self, space: str, predicates: Predicates) -> Deferred[int]:
        """count, started now; ``.wait()`` gives its result."""
        return self._submit(R.count(space, predicates))

    def async_sorted_search(
        self, space: str, predicates: Predicates, sort_by: str, limit: int, maxmin: str
    ) -> Deferred[List[Object]]:
        """sorted_search, started now; ``.wait()`` gives its result."""
        return self._submit(R.sorted_search(space, predicates, sort_by, limit, maxmin))

    def async_get_by_range(
        self, space: str, start: Key, end: Key, limit: Optional[int] = None
    ) -> Deferred[List[Object]]:
        """get_by_range, started now; ``.wait()`` gives its result."""
        return self._submit(R.get_by_range(space, start, end, limit))

    def async_get_by_tags(self, space: str, tags: Sequence[str]) -> Deferred[List[Object]]:
        """get_by_tags, started now; ``.wait()`` gives its result."""
        return self._submit(R.get_by_tags(space, tags))

    def async_search_describe(self, space: str, predicates: Predicates) -> Deferred[str]:
        """search_describe, started now; ``.wait()`` gives its result."""
        return self._submit(R.search_describe(space, predicates))

    def async_atomic_add(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """atomic_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_add", attrs))

    def async_cond_atomic_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_atomic_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_add", attrs, predicates))

    def async_group_atomic_add(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_atomic_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "num_add", attrs))

    def async_atomic_sub(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """atomic_sub, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_sub", attrs))

    def async_cond_atomic_sub(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_atomic_sub, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_sub", attrs, predicates))

    def async_group_atomic_sub(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_atomic_sub, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "num_sub", attrs))

    def async_atomic_mul(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """atomic_mul, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_mul", attrs))

    def async_cond_atomic_mul(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_atomic_mul, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_mul", attrs, predicates))

    def async_group_atomic_mul(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_atomic_mul, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "num_mul", attrs))

    def async_atomic_div(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """atomic_div, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_div", attrs))

    def async_cond_atomic_div(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_atomic_div, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_div", attrs, predicates))

    def async_group_atomic_div(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_atomic_div, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "num_div", attrs))

    def async_atomic_mod(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """atomic_mod, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_mod", attrs))

    def async_cond_atomic_mod(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_atomic_mod, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_mod", attrs, predicates))

    def async_group_atomic_mod(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_atomic_mod, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "num_mod", attrs))

    def async_atomic_and(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """atomic_and, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_and", attrs))

    def async_cond_atomic_and(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_atomic_and, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_and", attrs, predicates))

    def async_group_atomic_and(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_atomic_and, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "num_and", attrs))

    def async_atomic_or(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """atomic_or, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_or", attrs))

    def async_cond_atomic_or(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_atomic_or, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_or", attrs, predicates))

    def async_group_atomic_or(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_atomic_or, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "num_or", attrs))

    def async_atomic_xor(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """atomic_xor, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_xor", attrs))

    def async_cond_atomic_xor(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_atomic_xor, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_xor", attrs, predicates))

    def async_group_atomic_xor(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_atomic_xor, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "num_xor", attrs))

    def async_atomic_min(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """atomic_min, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_min", attrs))

    def async_cond_atomic_min(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_atomic_min, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_min", attrs, predicates))

    def async_group_atomic_min(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_atomic_min, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "num_min", attrs))

    def async_atomic_max(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """atomic_max, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_max", attrs))

    def async_cond_atomic_max(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_atomic_max, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "num_max", attrs, predicates))

    def async_group_atomic_max(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_atomic_max, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "num_max", attrs))

    def async_string_prepend(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """string_prepend, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "string_prepend", attrs))

    def async_cond_string_prepend(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_string_prepend, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "string_prepend", attrs, predicates))

    def async_group_string_prepend(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_string_prepend, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "string_prepend", attrs))

    def async_string_append(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """string_append, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "string_append", attrs))

    def async_cond_string_append(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_string_append, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "string_append", attrs, predicates))

    def async_group_string_append(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_string_append, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "string_append", attrs))

    def async_list_lpush(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """list_lpush, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "list_lpush", attrs))

    def async_cond_list_lpush(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_list_lpush, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "list_lpush", attrs, predicates))

    def async_group_list_lpush(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_list_lpush, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "list_lpush", attrs))

    def async_list_rpush(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """list_rpush, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "list_rpush", attrs))

    def async_cond_list_rpush(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_list_rpush, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "list_rpush", attrs, predicates))

    def async_group_list_rpush(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_list_rpush, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "list_rpush", attrs))

    def async_set_add(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """set_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "set_add", attrs))

    def async_cond_set_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_set_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "set_add", attrs, predicates))

    def async_group_set_add(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_set_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "set_add", attrs))

    def async_set_remove(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """set_remove, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "set_remove", attrs))

    def async_cond_set_remove(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_set_remove, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "set_remove", attrs, predicates))

    def async_group_set_remove(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_set_remove, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "set_remove", attrs))

    def async_set_union(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """set_union, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "set_union", attrs))

    def async_cond_set_union(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_set_union, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "set_union", attrs, predicates))

    def async_group_set_union(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_set_union, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "set_union", attrs))

    def async_set_intersect(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """set_intersect, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "set_intersect", attrs))

    def async_cond_set_intersect(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_set_intersect, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "set_intersect", attrs, predicates))

    def async_group_set_intersect(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_set_intersect, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "set_intersect", attrs))

    def async_map_add(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """map_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_add", attrs))

    def async_cond_map_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_add", attrs, predicates))

    def async_group_map_add(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_add", attrs))

    def async_map_remove(self, space: str, key: Key, attrs: Attributes) -> Deferred[Optional[bool]]:
        """map_remove, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_remove", attrs))

    def async_cond_map_remove(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_remove, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_remove", attrs, predicates))

    def async_group_map_remove(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_remove, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_remove", attrs))

    def async_map_atomic_add(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_atomic_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_add", attrs))

    def async_cond_map_atomic_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_atomic_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_add", attrs, predicates))

    def async_group_map_atomic_add(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_atomic_add, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_num_add", attrs))

    def async_map_atomic_sub(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_atomic_sub, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_sub", attrs))

    def async_cond_map_atomic_sub(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_atomic_sub, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_sub", attrs, predicates))

    def async_group_map_atomic_sub(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_atomic_sub, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_num_sub", attrs))

    def async_map_atomic_mul(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_atomic_mul, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_mul", attrs))

    def async_cond_map_atomic_mul(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_atomic_mul, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_mul", attrs, predicates))

    def async_group_map_atomic_mul(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_atomic_mul, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_num_mul", attrs))

    def async_map_atomic_div(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_atomic_div, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_div", attrs))

    def async_cond_map_atomic_div(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_atomic_div, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_div", attrs, predicates))

    def async_group_map_atomic_div(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_atomic_div, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_num_div", attrs))

    def async_map_atomic_mod(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_atomic_mod, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_mod", attrs))

    def async_cond_map_atomic_mod(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_atomic_mod, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_mod", attrs, predicates))

    def async_group_map_atomic_mod(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_atomic_mod, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_num_mod", attrs))

    def async_map_atomic_and(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_atomic_and, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_and", attrs))

    def async_cond_map_atomic_and(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_atomic_and, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_and", attrs, predicates))

    def async_group_map_atomic_and(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_atomic_and, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_num_and", attrs))

    def async_map_atomic_or(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_atomic_or, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_or", attrs))

    def async_cond_map_atomic_or(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_atomic_or, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_or", attrs, predicates))

    def async_group_map_atomic_or(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_atomic_or, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_num_or", attrs))

    def async_map_atomic_xor(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_atomic_xor, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_xor", attrs))

    def async_cond_map_atomic_xor(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_atomic_xor, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_xor", attrs, predicates))

    def async_group_map_atomic_xor(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_atomic_xor, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_num_xor", attrs))

    def async_map_atomic_min(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_atomic_min, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_min", attrs))

    def async_cond_map_atomic_min(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_atomic_min, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_min", attrs, predicates))

    def async_group_map_atomic_min(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_atomic_min, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_num_min", attrs))

    def async_map_atomic_max(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_atomic_max, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_max", attrs))

    def async_cond_map_atomic_max(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_atomic_max, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_num_max", attrs, predicates))

    def async_group_map_atomic_max(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_atomic_max, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_num_max", attrs))

    def async_map_string_prepend(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_string_prepend, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_string_prepend", attrs))

    def async_cond_map_string_prepend(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_string_prepend, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_string_prepend", attrs, predicates))

    def async_group_map_string_prepend(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_string_prepend, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_string_prepend", attrs))

    def async_map_string_append(
        self, space: str, key: Key, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """map_string_append, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_string_append", attrs))

    def async_cond_map_string_append(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Deferred[Optional[bool]]:
        """cond_map_string_append, started now; ``.wait()`` gives its result."""
        return self._submit(R.atomic(space, key, "map_string_append", attrs, predicates))

    def async_group_map_string_append(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Deferred[int]:
        """group_map_string_append, started now; ``.wait()`` gives its result."""
        return self._submit(R.group_atomic(space, predicates, "map_string_append", attrs))
    # END GENERATED: Client's async_ operations


def _stream(stream: Any) -> Iterator[Object]:
    try:
        for obj in stream:
            yield obj
    except NativeError as e:
        raise from_native(e) from None
