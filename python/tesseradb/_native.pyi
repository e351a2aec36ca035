# Type stub of the native module tesseradb._native (python/src/lib.rs, PyO3 over tessera-client).
# Applications use tesseradb.Client, tesseradb.aio.Client and tesseradb.Admin instead.

from typing import Any, Awaitable, Dict, Iterator, List, Optional, Tuple

#: The atomic operations the module takes, by name (see _operations.py).
FUNCALL_OPS: List[str]
#: The operations NativeClient.call (submit, call_async, call_batched) takes, by name: the
#: ``native`` of _operations.CALLS, and those the hand-written methods call.
CALL_OPS: List[str]

class NativeError(Exception):
    """args == (symbol, code, message), e.g. ("UNKNOWNSPACE", 8003, "no space named 'x'").
    symbol is a server status ("NOTFOUND" 8001 ... "BADALTER" 8019) or a client failure
    ("CONNECTION" 8100, also when no coordinator answered; "PROTOCOL" 8101)."""

    args: Tuple[str, int, str]

class NativeDeferred:
    def wait(self) -> Any: ...

class NativeSearch:
    def __iter__(self) -> Iterator[Dict[str, Any]]: ...
    def __next__(self) -> Dict[str, Any]: ...

class NativeCompletions:
    def __init__(self, wake_fd: int) -> None:
        """wake_fd: the write end of a pipe (reopened here, so it may be closed after); one
        byte is written to it, without the GIL, when an outcome arrives to an empty queue.
        Read the pipe before take()."""
    def take(self) -> List[Tuple[int, bool, Any]]:
        """Every outcome queued since the last call: (ticket, True, value) or
        (ticket, False, exception)."""

class NativeClient:
    def __init__(
        self,
        addresses: str,
        timeout: float = 10.0,
        token: Optional[str] = None,
        tls_ca: Optional[str] = None,
        *,
        read_from: str = "any",
    ) -> None:
        """addresses: "host:port", or several comma-separated (a cluster's coordinators);
        timeout: seconds a request may take, retries included; token: presented on every
        connection, for daemons started with --auth; tls_ca: path of the PEM certificate
        authority to trust, for daemons serving TLS; read_from: which replica a get asks in a
        cluster, "any" (any complete replica of the key's region, in turn) or "leader" (the
        key's point leader only), both linearizable (anything else: ValueError, before
        connecting)."""
    def call(self, op: str, args: Tuple[Any, ...]) -> Any:
        """op "config" -> {"cluster", "epoch", "servers": [{"id", "address"}], "spaces":
        [{"name", "id", "regions", "tolerate", "replicas"}]}; op "coordinators" -> one dict
        per coordinator: {"address", "id", "leader", "term", "last_applied", "epoch",
        "members"}, or {"address", "error"}; op "add_subspace" (space, [attribute, ...]) and
        "drop_subspace" (space, id) -> the subspace's id; ops "subspaces" (space) and
        "wait_built" (space, timeout seconds or None) -> one dict per subspace id: {"id",
        "attributes", "state": "serving" | "building" | "dropped"}, with "backfilled" and
        "key_regions" for the one being built; op "add_formula" (space, [overlay, ...], id or
        None) -> the formula's id once puts can name it; op "put" (space, key, mode,
        conditions, changes, formula id or None) -> True."""
    def call_async(self, op: str, args: Tuple[Any, ...]) -> Awaitable[Any]: ...
    def call_batched(
        self, op: str, args: Tuple[Any, ...], ticket: int, completions: NativeCompletions
    ) -> None:
        """Starts op(*args); its outcome is queued in completions under ticket."""
    def submit(self, op: str, args: Tuple[Any, ...]) -> NativeDeferred: ...
    def search_iter(self, space: str, predicates: List[Tuple[str, str, Any]]) -> NativeSearch: ...
