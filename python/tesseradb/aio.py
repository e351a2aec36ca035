"""``tesseradb.aio.Client``: the same operations as ``tesseradb.Client``, as coroutines.

Each operation is awaited on the running event loop; the native module does the network work
on its own threads and queues each answer, waking the loop once per batch of answers (not once
per answer): many operations in flight cost the loop one wake-up for all that completed
together. ``search`` returns a ``list``
(all matches, gathered before the coroutine returns); use ``count`` first or narrow the
predicates when a search could match very many objects. There are no ``async_<op>`` methods
here: ``asyncio.create_task`` or ``asyncio.gather`` do that job.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar

from . import _requests as R
from ._native import NativeClient, NativeCompletions, NativeError
from ._requests import Attributes, Key, Object
from .client import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_TIMEOUT, _connect
from .errors import ClientError, ConnectionFailedError
from .predicates import Predicates

__all__ = ["Client", "connect"]

T = TypeVar("T")


class _Completions:
    """The futures of one event loop's operations, resolved in batches (see the module). Each
    future gets the operation's final answer (HyperDex's conventions applied in the drain), so
    the coroutine awaiting it has nothing left to do."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._pending: Dict[int, Tuple["asyncio.Future[Any]", R.Request[Any]]] = {}
        self._next = 0
        self.native = NativeCompletions(self._wake)

    def _wake(self) -> None:
        # On a native thread: hand the drain to the loop's own thread.
        try:
            self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:
            pass  # the loop is closed: nobody waits for these any more

    def _drain(self) -> None:
        for ticket, ok, value in self.native.take():
            entry = self._pending.pop(ticket, None)
            if entry is None:
                continue
            future, request = entry
            if not future.done():  # else cancelled meanwhile
                _settle(future, request, ok, value)

    def start(self, native: NativeClient, request: R.Request[T]) -> "asyncio.Future[T]":
        ticket = self._next
        self._next += 1
        future: "asyncio.Future[T]" = self.loop.create_future()
        self._pending[ticket] = (future, request)
        try:
            native.call_batched(request.op, request.args, ticket, self.native)
        except NativeError as e:
            # Refused before it was sent (a value of the wrong type...): answered at once.
            del self._pending[ticket]
            _settle(future, request, False, e)
        except BaseException:
            del self._pending[ticket]
            raise
        return future


def _settle(future: "asyncio.Future[T]", request: R.Request[T], ok: bool, value: Any) -> None:
    """Resolves ``future`` with the request's answer to the native outcome (HyperDex's
    conventions: NOTFOUND and CMPFAIL may be answers), or with the error it raises."""
    try:
        answer = request.done(value) if ok else request.failed(value)
    except BaseException as error:
        future.set_exception(error)
    else:
        future.set_result(answer)


async def connect(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    token: Optional[str] = None,
    tls_ca: Optional[str] = None,
) -> Client:
    """Connect without blocking the event loop (``Client(...)`` connects synchronously)."""
    native = await asyncio.get_running_loop().run_in_executor(
        None, _connect, host, port, timeout, token, tls_ca
    )
    return Client(host, port, _native=native)


class Client:
    """An asyncio connection to a Tessera server or cluster (``host`` and ``port`` as for
    ``tesseradb.Client``). Methods must be awaited inside a running event loop. ``Client(host, port)`` connects at once, blocking for the connection's round
    trip; ``await tesseradb.aio.connect(host, port)`` does not block the loop."""

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        token: Optional[str] = None,
        tls_ca: Optional[str] = None,
        _native: Optional[NativeClient] = None,
    ) -> None:
        self.host = host
        self.port = port
        if _native is None:
            _native = _connect(host, port, timeout, token, tls_ca)
        self._native: Optional[NativeClient] = _native
        self._completions: Optional[_Completions] = None

    def __repr__(self) -> str:
        return f"tesseradb.aio.Client({self.host!r}, {self.port!r})"

    def close(self) -> None:
        """Drop the connection (operations still in flight finish). Idempotent."""
        self._native = None

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def _run(self, request: R.Request[T]) -> "asyncio.Future[T]":
        """The future of ``request``'s answer, started now; each operation's coroutine awaits it
        (one coroutine an operation, nothing to do once the answer arrives)."""
        native = self._native
        if native is None:
            raise ConnectionFailedError(8100, "CONNECTION", "the client is closed")
        completions = self._completions
        loop = asyncio.get_running_loop()
        if completions is None or completions.loop is not loop:
            completions = self._completions = _Completions(loop)
        return completions.start(native, request)

    async def search(self, space: str, predicates: Predicates) -> List[Object]:
        """Every object matching predicates, key included, as a list."""
        return await self._run(R.search(space, predicates))

    # One coroutine per HyperDex operation, same names and argument order as tesseradb.Client.

    async def get(self, space: str, key: Key) -> Optional[Object]:
        """The object's attributes (without the key), or None if the key has no object."""
        return await self._run(R.get(space, key))

    async def multi_put(
        self, space: str, items: Mapping[Key, Attributes]
    ) -> Dict[Key, Optional[ClientError]]:
        """Put each key's attributes as ``put`` would; not a transaction: None per stored key,
        else the ``ClientError`` that refused it."""
        return await self._run(R.multi_put(space, items))

    async def multi_get(self, space: str, keys: Sequence[Key]) -> List[Optional[Object]]:
        """The objects of ``keys``, in their order, None for a key with no object (each read
        as ``get`` reads it; not one snapshot)."""
        return await self._run(R.multi_get(space, keys))

    async def get_partial(self, space: str, key: Key, attrs: Sequence[str]) -> Optional[Object]:
        """Only the named attributes of the object, or None if the key has no object."""
        return await self._run(R.get_partial(space, key, attrs))

    async def put(
        self, space: str, key: Key, attrs: Attributes, *, formula: Optional[str] = None
    ) -> Optional[bool]:
        """Create the object, or update the attributes given (others keep their values). True.

        ``formula`` (a dynamic space only) places the document by that compression formula
        (an id ``Admin.add_formula`` returned; ``""`` for the default, the unispace); the
        document keeps it until a put names another."""
        return await self._run(R.put(space, key, attrs, formula))

    async def put_if_not_exist(
        self, space: str, key: Key, attrs: Attributes, *, formula: Optional[str] = None
    ) -> Optional[bool]:
        """Create the object: True, or False if the key already has one (``formula`` as for
        ``put``)."""
        return await self._run(R.put_if_not_exist(space, key, attrs, formula))

    async def cond_put(
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
        return await self._run(R.cond_put(space, key, predicates, attrs, formula))

    async def cond_put_or_create(
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
        return await self._run(R.cond_put_or_create(space, key, predicates, attrs, formula))

    async def delete(self, space: str, key: Key) -> Optional[bool]:
        """Delete the object: True, or None if the key had none."""
        return await self._run(R.delete(space, key))

    async def cond_del(self, space: str, key: Key, predicates: Predicates) -> Optional[bool]:
        """Delete the object if it matches predicates: True, False if it does not, None if
        absent."""
        return await self._run(R.delete(space, key, predicates))

    async def group_del(self, space: str, predicates: Predicates) -> int:
        """Delete every object matching predicates; the number deleted."""
        return await self._run(R.group_del(space, predicates))

    async def count(self, space: str, predicates: Predicates) -> int:
        """The number of objects matching predicates."""
        return await self._run(R.count(space, predicates))

    async def sorted_search(
        self,
        space: str,
        predicates: Predicates,
        sort_by: str,
        limit: int,
        maxmin: str,
    ) -> List[Object]:
        """At most limit matching objects (key included), by sort_by: largest first for "max",
        smallest first for "min"."""
        return await self._run(R.sorted_search(space, predicates, sort_by, limit, maxmin))

    async def get_by_range(
        self, space: str, start: Key, end: Key, limit: Optional[int] = None
    ) -> List[Object]:
        """The objects whose keys lie in [start, end), key included, smallest key first, at
        most ``limit`` of them. A space with ``placement ordered`` reads only the regions the
        range overlaps; any other reads every region. Like a search, each object is a version
        it had; the range is not one snapshot."""
        return await self._run(R.get_by_range(space, start, end, limit))

    async def get_by_tags(self, space: str, tags: Sequence[str]) -> List[Object]:
        """The objects (key included, in key order) whose tags include every one of ``tags``:
        the set(string) attribute of the space's ``placement tagged``, or its only set(string)
        attribute. A tagged space reads only the regions of the tags' cells."""
        return await self._run(R.get_by_tags(space, tags))

    async def search_describe(self, space: str, predicates: Predicates) -> str:
        """How a search for predicates would run: the subspace chosen, the regions and servers
        it contacts."""
        return await self._run(R.search_describe(space, predicates))

    # BEGIN GENERATED by scripts/gen-python-ops.py from _operations.py: aio.Client's atomic operations. Do not edit.
    async def atomic_add(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr += value (int or float). True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "num_add", attrs))

    async def cond_atomic_add(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """atomic_add, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "num_add", attrs, predicates))

    async def group_atomic_add(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_add on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "num_add", attrs))

    async def atomic_sub(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr -= value. True; None if absent; False if it
        cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "num_sub", attrs))

    async def cond_atomic_sub(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """atomic_sub, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "num_sub", attrs, predicates))

    async def group_atomic_sub(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_sub on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "num_sub", attrs))

    async def atomic_mul(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr *= value. True; None if absent; False if it
        cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "num_mul", attrs))

    async def cond_atomic_mul(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """atomic_mul, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "num_mul", attrs, predicates))

    async def group_atomic_mul(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_mul on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "num_mul", attrs))

    async def atomic_div(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr /= value (ints truncate toward zero). True; None
        if absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "num_div", attrs))

    async def cond_atomic_div(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """atomic_div, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "num_div", attrs, predicates))

    async def group_atomic_div(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_div on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "num_div", attrs))

    async def atomic_mod(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr %= value (ints: sign of the dividend, as in C).
        True; None if absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "num_mod", attrs))

    async def cond_atomic_mod(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """atomic_mod, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "num_mod", attrs, predicates))

    async def group_atomic_mod(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_mod on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "num_mod", attrs))

    async def atomic_and(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr &= value (ints). True; None if absent; False if
        it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "num_and", attrs))

    async def cond_atomic_and(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """atomic_and, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "num_and", attrs, predicates))

    async def group_atomic_and(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_and on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "num_and", attrs))

    async def atomic_or(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr |= value (ints). True; None if absent; False if
        it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "num_or", attrs))

    async def cond_atomic_or(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """atomic_or, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "num_or", attrs, predicates))

    async def group_atomic_or(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_or on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "num_or", attrs))

    async def atomic_xor(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr ^= value (ints). True; None if absent; False if
        it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "num_xor", attrs))

    async def cond_atomic_xor(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """atomic_xor, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "num_xor", attrs, predicates))

    async def group_atomic_xor(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_xor on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "num_xor", attrs))

    async def atomic_min(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr = min(attr, value). True; None if absent; False
        if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "num_min", attrs))

    async def cond_atomic_min(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """atomic_min, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "num_min", attrs, predicates))

    async def group_atomic_min(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_min on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "num_min", attrs))

    async def atomic_max(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr = max(attr, value). True; None if absent; False
        if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "num_max", attrs))

    async def cond_atomic_max(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """atomic_max, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "num_max", attrs, predicates))

    async def group_atomic_max(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """atomic_max on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "num_max", attrs))

    async def string_prepend(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr = value + attr (strings). True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "string_prepend", attrs))

    async def cond_string_prepend(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """string_prepend, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "string_prepend", attrs, predicates))

    async def group_string_prepend(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """string_prepend on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "string_prepend", attrs))

    async def string_append(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: attr = attr + value (strings). True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "string_append", attrs))

    async def cond_string_append(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """string_append, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "string_append", attrs, predicates))

    async def group_string_append(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """string_append on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "string_append", attrs))

    async def list_lpush(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: insert value at the front of the list. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "list_lpush", attrs))

    async def cond_list_lpush(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """list_lpush, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "list_lpush", attrs, predicates))

    async def group_list_lpush(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """list_lpush on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "list_lpush", attrs))

    async def list_rpush(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: append value to the list. True; None if absent; False
        if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "list_rpush", attrs))

    async def cond_list_rpush(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """list_rpush, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "list_rpush", attrs, predicates))

    async def group_list_rpush(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """list_rpush on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "list_rpush", attrs))

    async def set_add(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: add the element value to the set. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "set_add", attrs))

    async def cond_set_add(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """set_add, only if the object matches predicates: True; False if not (or it cannot apply);
        None if absent."""
        return await self._run(R.atomic(space, key, "set_add", attrs, predicates))

    async def group_set_add(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """set_add on every object matching predicates; the number changed (objects where it cannot
        apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "set_add", attrs))

    async def set_remove(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: remove the element value from the set. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "set_remove", attrs))

    async def cond_set_remove(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """set_remove, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "set_remove", attrs, predicates))

    async def group_set_remove(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """set_remove on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "set_remove", attrs))

    async def set_union(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: add every element of the set value. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "set_union", attrs))

    async def cond_set_union(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """set_union, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "set_union", attrs, predicates))

    async def group_set_union(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """set_union on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "set_union", attrs))

    async def set_intersect(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: keep only the elements also in the set value. True;
        None if absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "set_intersect", attrs))

    async def cond_set_intersect(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """set_intersect, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "set_intersect", attrs, predicates))

    async def group_set_intersect(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """set_intersect on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "set_intersect", attrs))

    async def map_add(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: insert or overwrite every entry of the dict value.
        True; None if absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_add", attrs))

    async def cond_map_add(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_add, only if the object matches predicates: True; False if not (or it cannot apply);
        None if absent."""
        return await self._run(R.atomic(space, key, "map_add", attrs, predicates))

    async def group_map_add(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_add on every object matching predicates; the number changed (objects where it cannot
        apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_add", attrs))

    async def map_remove(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: remove the entry whose key is value (absent is fine).
        True; None if absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_remove", attrs))

    async def cond_map_remove(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_remove, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_remove", attrs, predicates))

    async def group_map_remove(self, space: str, predicates: Predicates, attrs: Attributes) -> int:
        """map_remove on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_remove", attrs))

    async def map_atomic_add(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] += v for every k: v of the dict value (absent
        counts as 0). True; None if absent; False if it cannot apply (overflow, division by
        zero)."""
        return await self._run(R.atomic(space, key, "map_num_add", attrs))

    async def cond_map_atomic_add(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_atomic_add, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_num_add", attrs, predicates))

    async def group_map_atomic_add(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_atomic_add on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_num_add", attrs))

    async def map_atomic_sub(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] -= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_num_sub", attrs))

    async def cond_map_atomic_sub(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_atomic_sub, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_num_sub", attrs, predicates))

    async def group_map_atomic_sub(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_atomic_sub on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_num_sub", attrs))

    async def map_atomic_mul(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] *= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_num_mul", attrs))

    async def cond_map_atomic_mul(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_atomic_mul, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_num_mul", attrs, predicates))

    async def group_map_atomic_mul(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_atomic_mul on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_num_mul", attrs))

    async def map_atomic_div(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] /= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_num_div", attrs))

    async def cond_map_atomic_div(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_atomic_div, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_num_div", attrs, predicates))

    async def group_map_atomic_div(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_atomic_div on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_num_div", attrs))

    async def map_atomic_mod(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] %= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_num_mod", attrs))

    async def cond_map_atomic_mod(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_atomic_mod, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_num_mod", attrs, predicates))

    async def group_map_atomic_mod(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_atomic_mod on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_num_mod", attrs))

    async def map_atomic_and(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] &= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_num_and", attrs))

    async def cond_map_atomic_and(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_atomic_and, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_num_and", attrs, predicates))

    async def group_map_atomic_and(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_atomic_and on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_num_and", attrs))

    async def map_atomic_or(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] |= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_num_or", attrs))

    async def cond_map_atomic_or(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_atomic_or, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_num_or", attrs, predicates))

    async def group_map_atomic_or(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_atomic_or on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_num_or", attrs))

    async def map_atomic_xor(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] ^= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_num_xor", attrs))

    async def cond_map_atomic_xor(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_atomic_xor, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_num_xor", attrs, predicates))

    async def group_map_atomic_xor(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_atomic_xor on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_num_xor", attrs))

    async def map_atomic_min(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] = min(map[k], v) for every k: v. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_num_min", attrs))

    async def cond_map_atomic_min(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_atomic_min, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_num_min", attrs, predicates))

    async def group_map_atomic_min(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_atomic_min on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_num_min", attrs))

    async def map_atomic_max(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] = max(map[k], v) for every k: v. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_num_max", attrs))

    async def cond_map_atomic_max(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_atomic_max, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_num_max", attrs, predicates))

    async def group_map_atomic_max(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_atomic_max on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_num_max", attrs))

    async def map_string_prepend(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] = s + map[k] for every k: s. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_string_prepend", attrs))

    async def cond_map_string_prepend(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_string_prepend, only if the object matches predicates: True; False if not (or it
        cannot apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_string_prepend", attrs, predicates))

    async def group_map_string_prepend(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_string_prepend on every object matching predicates; the number changed (objects where
        it cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_string_prepend", attrs))

    async def map_string_append(self, space: str, key: Key, attrs: Attributes) -> Optional[bool]:
        """Atomically, on an existing object: map[k] = map[k] + s for every k: s. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return await self._run(R.atomic(space, key, "map_string_append", attrs))

    async def cond_map_string_append(
        self,
        space: str,
        key: Key,
        predicates: Predicates,
        attrs: Attributes,
    ) -> Optional[bool]:
        """map_string_append, only if the object matches predicates: True; False if not (or it
        cannot apply); None if absent."""
        return await self._run(R.atomic(space, key, "map_string_append", attrs, predicates))

    async def group_map_string_append(
        self,
        space: str,
        predicates: Predicates,
        attrs: Attributes,
    ) -> int:
        """map_string_append on every object matching predicates; the number changed (objects where
        it cannot apply are skipped)."""
        return await self._run(R.group_atomic(space, predicates, "map_string_append", attrs))
    # END GENERATED: aio.Client's atomic operations
