"""``tesseradb.aio.Client``: the same operations as ``tesseradb.Client``, for asyncio.

Each method starts its operation at once and returns an ``Answer``: an ``asyncio.Future`` of
the operation's result, so ``await client.get(...)`` waits for it and ``asyncio.gather`` takes
many without wrapping each in a task. asyncio also accepts an ``Answer`` as a coroutine
(``asyncio.create_task`` works). The native module does the network work on its own threads
and queues each answer, waking the loop once per batch of answers (not once per answer): many
operations in flight cost the loop one wake-up for all that completed together. ``search``
answers a ``list`` (all matches, gathered first); use ``count`` first or narrow the
predicates when a search could match very many objects. There are no ``async_<op>`` methods
here: every method is already one.
"""

from __future__ import annotations

import asyncio
import collections.abc
import os
import weakref
from typing import Any, Dict, Generator, List, Mapping, Optional, Sequence, Tuple, TypeVar

from . import _requests as R
from ._native import NativeClient, NativeCompletions, NativeError
from ._requests import Attributes, Key, Object
from .client import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_TIMEOUT, _connect
from .errors import ClientError, ConnectionFailedError
from .predicates import Predicates

__all__ = ["Answer", "Client", "connect"]

T = TypeVar("T")


class Answer(asyncio.Future[T]):  # type: ignore[misc]
    """The answer to one operation, started when the method was called: an ``asyncio.Future``
    (await it, gather it, ``asyncio.wait_for`` it, cancel it) that also passes for a coroutine,
    so ``asyncio.create_task(client.get(...))`` works as it does with ``async def`` methods (and
    ``asyncio.wait``, which refuses coroutines, wants such tasks).

    A future, not a coroutine, because ``asyncio.gather`` wraps every coroutine in a task: a
    few microseconds an operation, as much as the rest of the path (see docs/python.md)."""

    __slots__ = ("_steps",)

    # The coroutine protocol, for asyncio.create_task: the steps of awaiting this future.
    def _awaiting(self) -> Generator[Any, None, T]:
        steps = getattr(self, "_steps", None)
        if steps is None:
            steps = self._steps = self.__await__()
        return steps

    def send(self, value: None) -> Any:
        return self._awaiting().send(value)

    def throw(self, *error: Any) -> Any:
        return self._awaiting().throw(*error)

    def close(self) -> None:
        pass  # nothing to release: the operation finishes either way


collections.abc.Coroutine.register(Answer)


class _Completions:
    """The futures of one event loop's operations, resolved in batches (see the module). The
    native side writes a byte to a pipe the loop watches when answers arrive to an empty queue
    (no GIL needed on its thread); the drain reads the pipe, then takes every queued answer.
    Each future gets the operation's final answer (HyperDex's conventions applied in the
    drain), so whoever awaits it has nothing left to do."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._pending: Dict[int, Tuple[Answer[Any], R.Request[Any]]] = {}
        self._next = 0
        self._closing = False
        read, write = os.pipe()
        try:
            self.native = NativeCompletions(write)  # opens its own descriptor of the pipe
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        os.set_blocking(read, False)
        self._wake_fd: Optional[int] = read
        loop.add_reader(read, self._drain)
        # The loop holds the drain while it is registered, so this runs only once the reader
        # is removed or the loop's selector closed: the descriptor is no longer watched.
        weakref.finalize(self, _close_quietly, read)

    def _drain(self) -> None:
        fd = self._wake_fd
        if fd is not None:
            try:
                os.read(fd, 4096)  # before take(): see NativeCompletions
            except BlockingIOError:
                pass  # woken by a byte an earlier drain already read
        for ticket, ok, value in self.native.take():
            entry = self._pending.pop(ticket, None)
            if entry is None:
                continue
            future, request = entry
            if not future.done():  # else cancelled meanwhile
                _settle(future, request, ok, value)
        if self._closing and not self._pending:
            self._stop_watching()

    def close(self) -> None:
        """Stop watching the pipe once the operations in flight are answered."""
        self._closing = True
        if not self._pending:
            self._stop_watching()

    def _stop_watching(self) -> None:
        fd, self._wake_fd = self._wake_fd, None
        if fd is not None and not self.loop.is_closed():
            self.loop.remove_reader(fd)

    def start(self, native: NativeClient, request: R.Request[T]) -> Answer[T]:
        ticket = self._next
        self._next += 1
        future: Answer[T] = Answer(loop=self.loop)
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


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _settle(future: Answer[T], request: R.Request[T], ok: bool, value: Any) -> None:
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
    read_from: str = "any",
) -> Client:
    """Connect without blocking the event loop (``Client(...)`` connects synchronously)."""
    native = await asyncio.get_running_loop().run_in_executor(
        None, _connect, host, port, timeout, token, tls_ca, read_from
    )
    return Client(host, port, _native=native)


class Client:
    """An asyncio connection to a Tessera server or cluster (``host`` and ``port`` as for
    ``tesseradb.Client``). Call its methods inside a running event loop: each starts its
    operation at once and returns its ``Answer`` to await. ``Client(host, port)`` connects at
    once, blocking for the connection's round trip; ``await tesseradb.aio.connect(host,
    port)`` does not block the loop. ``timeout``, ``token`` and ``tls_ca`` are as for
    ``tesseradb.Client``; ``read_from`` is which replica a get asks in a cluster: ``"any"``
    (the default), any complete replica of the key's region, in turn, or ``"leader"``, the
    key's point leader only; both linearizable."""

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        token: Optional[str] = None,
        tls_ca: Optional[str] = None,
        read_from: str = "any",
        _native: Optional[NativeClient] = None,
    ) -> None:
        self.host = host
        self.port = port
        if _native is None:
            _native = _connect(host, port, timeout, token, tls_ca, read_from)
        self._native: Optional[NativeClient] = _native
        self._completions: Optional[_Completions] = None

    def __repr__(self) -> str:
        return f"tesseradb.aio.Client({self.host!r}, {self.port!r})"

    def close(self) -> None:
        """Drop the connection (operations still in flight finish). Idempotent. Call it on
        the event loop's thread (``async with`` does)."""
        self._native = None
        if self._completions is not None:
            self._completions.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def _run(self, request: R.Request[T]) -> Answer[T]:
        """``request`` started now, its answer to come (see ``Answer``)."""
        loop = asyncio.get_running_loop()
        native = self._native
        if native is None:
            closed: Answer[T] = Answer(loop=loop)
            closed.set_exception(ConnectionFailedError(8100, "CONNECTION", "the client is closed"))
            return closed
        completions = self._completions
        if completions is None or completions.loop is not loop:
            completions = self._completions = _Completions(loop)
        return completions.start(native, request)

    # Every operation, as tesseradb.Client has it (search as a list), is written from its row of
    # _operations.py by scripts/gen-python-ops.py: each starts the request _requests builds.
    # BEGIN GENERATED by scripts/gen-python-ops.py from _operations.py: aio.Client's operations. Do not edit.
    def get(self, space: str, key: Key) -> Answer[Optional[Object]]:
        """The object's attributes (without the key), or None if the key has no object."""
        return self._run(R.get(space, key))

    def get_partial(self, space: str, key: Key, attrs: Sequence[str]) -> Answer[Optional[Object]]:
        """Only the named attributes of the object, or None if the key has no object."""
        return self._run(R.get_partial(space, key, attrs))

    def multi_get(self, space: str, keys: Sequence[Key]) -> Answer[List[Optional[Object]]]:
        """The objects of ``keys``, in their order, None for a key with no object (each read
        as ``get`` reads it; not one snapshot)."""
        return self._run(R.multi_get(space, keys))

    def multi_put(
        self, space: str, items: Mapping[Key, Attributes]
    ) -> Answer[Dict[Key, Optional[ClientError]]]:
        """Put each key's attributes as ``put`` would; not a transaction: None per stored key,
        else the ``ClientError`` that refused it."""
        return self._run(R.multi_put(space, items))

    def put(
        self, space: str, key: Key, attrs: Attributes, *, formula: Optional[str] = None
    ) -> Answer[Optional[bool]]:
        """Create the object, or update the attributes given (others keep their values). True.

        ``formula`` (a dynamic space only) places the document by that compression formula
        (an id ``Admin.add_formula`` returned; ``""`` for the default, the unispace); the
        document keeps it until a put names another."""
        return self._run(R.put(space, key, attrs, formula))

    def put_if_not_exist(
        self, space: str, key: Key, attrs: Attributes, *, formula: Optional[str] = None
    ) -> Answer[Optional[bool]]:
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
    ) -> Answer[Optional[bool]]:
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
    ) -> Answer[Optional[bool]]:
        """Create the object, or update it if it matches predicates: True, or False if it does
        not. ``formula`` as for ``put``."""
        return self._run(R.cond_put_or_create(space, key, predicates, attrs, formula))

    def delete(self, space: str, key: Key) -> Answer[Optional[bool]]:
        """Delete the object: True, or None if the key had none."""
        return self._run(R.delete(space, key))

    def cond_del(self, space: str, key: Key, predicates: Predicates) -> Answer[Optional[bool]]:
        """Delete the object if it matches predicates: True, False if it does not, None if
        absent."""
        return self._run(R.cond_del(space, key, predicates))

    def group_del(self, space: str, predicates: Predicates) -> Answer[int]:
        """Delete every object matching predicates; the number deleted."""
        return self._run(R.group_del(space, predicates))

    def count(self, space: str, predicates: Predicates) -> Answer[int]:
        """The number of objects matching predicates."""
        return self._run(R.count(space, predicates))

    def search(self, space: str, predicates: Predicates) -> Answer[List[Object]]:
        """Every object matching predicates, key included, as a list."""
        return self._run(R.search(space, predicates))

    def sorted_search(
        self, space: str, predicates: Predicates, sort_by: str, limit: int, maxmin: str
    ) -> Answer[List[Object]]:
        """At most limit matching objects (key included), by sort_by: largest first for "max",
        smallest first for "min"."""
        return self._run(R.sorted_search(space, predicates, sort_by, limit, maxmin))

    def get_by_range(
        self, space: str, start: Key, end: Key, limit: Optional[int] = None
    ) -> Answer[List[Object]]:
        """The objects whose keys lie in [start, end), key included, smallest key first, at
        most ``limit`` of them. A space with ``placement ordered`` reads only the regions the
        range overlaps; any other reads every region. Like a search, each object is a version
        it had; the range is not one snapshot."""
        return self._run(R.get_by_range(space, start, end, limit))

    def get_by_tags(self, space: str, tags: Sequence[str]) -> Answer[List[Object]]:
        """The objects (key included, in key order) whose tags include every one of ``tags``:
        the set(string) attribute of the space's ``placement tagged``, or its only set(string)
        attribute. A tagged space reads only the regions of the tags' cells."""
        return self._run(R.get_by_tags(space, tags))

    def search_describe(self, space: str, predicates: Predicates) -> Answer[str]:
        """How a search for predicates would run: the subspace chosen, the regions and servers
        it contacts."""
        return self._run(R.search_describe(space, predicates))

    def atomic_add(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr += value (int or float). True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_add", attrs))

    def cond_atomic_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """atomic_add, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_add", attrs, predicates))

    def group_atomic_add(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """atomic_add on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_add", attrs))

    def atomic_sub(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr -= value. True; None if absent; False if it
        cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_sub", attrs))

    def cond_atomic_sub(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """atomic_sub, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_sub", attrs, predicates))

    def group_atomic_sub(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """atomic_sub on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_sub", attrs))

    def atomic_mul(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr *= value. True; None if absent; False if it
        cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_mul", attrs))

    def cond_atomic_mul(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """atomic_mul, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_mul", attrs, predicates))

    def group_atomic_mul(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """atomic_mul on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_mul", attrs))

    def atomic_div(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr /= value (ints truncate toward zero). True; None
        if absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_div", attrs))

    def cond_atomic_div(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """atomic_div, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_div", attrs, predicates))

    def group_atomic_div(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """atomic_div on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_div", attrs))

    def atomic_mod(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr %= value (ints: sign of the dividend, as in C).
        True; None if absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_mod", attrs))

    def cond_atomic_mod(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """atomic_mod, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_mod", attrs, predicates))

    def group_atomic_mod(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """atomic_mod on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_mod", attrs))

    def atomic_and(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr &= value (ints). True; None if absent; False if
        it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_and", attrs))

    def cond_atomic_and(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """atomic_and, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_and", attrs, predicates))

    def group_atomic_and(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """atomic_and on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_and", attrs))

    def atomic_or(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr |= value (ints). True; None if absent; False if
        it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_or", attrs))

    def cond_atomic_or(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """atomic_or, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_or", attrs, predicates))

    def group_atomic_or(self, space: str, predicates: Predicates, attrs: Attributes) -> Answer[int]:
        """atomic_or on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_or", attrs))

    def atomic_xor(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr ^= value (ints). True; None if absent; False if
        it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_xor", attrs))

    def cond_atomic_xor(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """atomic_xor, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_xor", attrs, predicates))

    def group_atomic_xor(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """atomic_xor on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_xor", attrs))

    def atomic_min(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr = min(attr, value). True; None if absent; False
        if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_min", attrs))

    def cond_atomic_min(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """atomic_min, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_min", attrs, predicates))

    def group_atomic_min(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """atomic_min on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_min", attrs))

    def atomic_max(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr = max(attr, value). True; None if absent; False
        if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "num_max", attrs))

    def cond_atomic_max(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """atomic_max, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "num_max", attrs, predicates))

    def group_atomic_max(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """atomic_max on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "num_max", attrs))

    def string_prepend(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr = value + attr (strings). True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "string_prepend", attrs))

    def cond_string_prepend(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """string_prepend, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "string_prepend", attrs, predicates))

    def group_string_prepend(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """string_prepend on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "string_prepend", attrs))

    def string_append(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: attr = attr + value (strings). True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "string_append", attrs))

    def cond_string_append(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """string_append, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "string_append", attrs, predicates))

    def group_string_append(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """string_append on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "string_append", attrs))

    def list_lpush(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: insert value at the front of the list. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "list_lpush", attrs))

    def cond_list_lpush(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """list_lpush, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "list_lpush", attrs, predicates))

    def group_list_lpush(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """list_lpush on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "list_lpush", attrs))

    def list_rpush(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: append value to the list. True; None if absent; False
        if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "list_rpush", attrs))

    def cond_list_rpush(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """list_rpush, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "list_rpush", attrs, predicates))

    def group_list_rpush(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """list_rpush on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "list_rpush", attrs))

    def set_add(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: add the element value to the set. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "set_add", attrs))

    def cond_set_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """set_add, only if the object matches predicates: True; False if not (or it cannot apply);
        None if absent."""
        return self._run(R.atomic(space, key, "set_add", attrs, predicates))

    def group_set_add(self, space: str, predicates: Predicates, attrs: Attributes) -> Answer[int]:
        """set_add on every object matching predicates; the number changed (objects where it cannot
        apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "set_add", attrs))

    def set_remove(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: remove the element value from the set. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "set_remove", attrs))

    def cond_set_remove(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """set_remove, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "set_remove", attrs, predicates))

    def group_set_remove(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """set_remove on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "set_remove", attrs))

    def set_union(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: add every element of the set value. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "set_union", attrs))

    def cond_set_union(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """set_union, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "set_union", attrs, predicates))

    def group_set_union(self, space: str, predicates: Predicates, attrs: Attributes) -> Answer[int]:
        """set_union on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "set_union", attrs))

    def set_intersect(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: keep only the elements also in the set value. True;
        None if absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "set_intersect", attrs))

    def cond_set_intersect(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """set_intersect, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "set_intersect", attrs, predicates))

    def group_set_intersect(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """set_intersect on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "set_intersect", attrs))

    def map_add(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: insert or overwrite every entry of the dict value.
        True; None if absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_add", attrs))

    def cond_map_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_add, only if the object matches predicates: True; False if not (or it cannot apply);
        None if absent."""
        return self._run(R.atomic(space, key, "map_add", attrs, predicates))

    def group_map_add(self, space: str, predicates: Predicates, attrs: Attributes) -> Answer[int]:
        """map_add on every object matching predicates; the number changed (objects where it cannot
        apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_add", attrs))

    def map_remove(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: remove the entry whose key is value (absent is fine).
        True; None if absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_remove", attrs))

    def cond_map_remove(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_remove, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_remove", attrs, predicates))

    def group_map_remove(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_remove on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_remove", attrs))

    def map_atomic_add(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] += v for every k: v of the dict value (absent
        counts as 0). True; None if absent; False if it cannot apply (overflow, division by
        zero)."""
        return self._run(R.atomic(space, key, "map_num_add", attrs))

    def cond_map_atomic_add(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_atomic_add, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_add", attrs, predicates))

    def group_map_atomic_add(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_atomic_add on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_add", attrs))

    def map_atomic_sub(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] -= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_sub", attrs))

    def cond_map_atomic_sub(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_atomic_sub, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_sub", attrs, predicates))

    def group_map_atomic_sub(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_atomic_sub on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_sub", attrs))

    def map_atomic_mul(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] *= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_mul", attrs))

    def cond_map_atomic_mul(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_atomic_mul, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_mul", attrs, predicates))

    def group_map_atomic_mul(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_atomic_mul on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_mul", attrs))

    def map_atomic_div(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] /= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_div", attrs))

    def cond_map_atomic_div(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_atomic_div, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_div", attrs, predicates))

    def group_map_atomic_div(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_atomic_div on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_div", attrs))

    def map_atomic_mod(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] %= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_mod", attrs))

    def cond_map_atomic_mod(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_atomic_mod, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_mod", attrs, predicates))

    def group_map_atomic_mod(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_atomic_mod on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_mod", attrs))

    def map_atomic_and(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] &= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_and", attrs))

    def cond_map_atomic_and(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_atomic_and, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_and", attrs, predicates))

    def group_map_atomic_and(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_atomic_and on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_and", attrs))

    def map_atomic_or(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] |= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_or", attrs))

    def cond_map_atomic_or(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_atomic_or, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_or", attrs, predicates))

    def group_map_atomic_or(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_atomic_or on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_or", attrs))

    def map_atomic_xor(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] ^= v for every k: v. True; None if absent;
        False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_xor", attrs))

    def cond_map_atomic_xor(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_atomic_xor, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_xor", attrs, predicates))

    def group_map_atomic_xor(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_atomic_xor on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_xor", attrs))

    def map_atomic_min(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] = min(map[k], v) for every k: v. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_min", attrs))

    def cond_map_atomic_min(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_atomic_min, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_min", attrs, predicates))

    def group_map_atomic_min(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_atomic_min on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_min", attrs))

    def map_atomic_max(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] = max(map[k], v) for every k: v. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_num_max", attrs))

    def cond_map_atomic_max(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_atomic_max, only if the object matches predicates: True; False if not (or it cannot
        apply); None if absent."""
        return self._run(R.atomic(space, key, "map_num_max", attrs, predicates))

    def group_map_atomic_max(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_atomic_max on every object matching predicates; the number changed (objects where it
        cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_num_max", attrs))

    def map_string_prepend(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] = s + map[k] for every k: s. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_string_prepend", attrs))

    def cond_map_string_prepend(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_string_prepend, only if the object matches predicates: True; False if not (or it
        cannot apply); None if absent."""
        return self._run(R.atomic(space, key, "map_string_prepend", attrs, predicates))

    def group_map_string_prepend(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_string_prepend on every object matching predicates; the number changed (objects where
        it cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_string_prepend", attrs))

    def map_string_append(self, space: str, key: Key, attrs: Attributes) -> Answer[Optional[bool]]:
        """Atomically, on an existing object: map[k] = map[k] + s for every k: s. True; None if
        absent; False if it cannot apply (overflow, division by zero)."""
        return self._run(R.atomic(space, key, "map_string_append", attrs))

    def cond_map_string_append(
        self, space: str, key: Key, predicates: Predicates, attrs: Attributes
    ) -> Answer[Optional[bool]]:
        """map_string_append, only if the object matches predicates: True; False if not (or it
        cannot apply); None if absent."""
        return self._run(R.atomic(space, key, "map_string_append", attrs, predicates))

    def group_map_string_append(
        self, space: str, predicates: Predicates, attrs: Attributes
    ) -> Answer[int]:
        """map_string_append on every object matching predicates; the number changed (objects where
        it cannot apply are skipped)."""
        return self._run(R.group_atomic(space, predicates, "map_string_append", attrs))
    # END GENERATED: aio.Client's operations
