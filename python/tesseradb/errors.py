"""The exceptions of tesseradb: one ``ClientError`` subclass per status.

Every error carries the stable numeric ``status`` (8001..8021 from a server or coordinator,
8100/8101 from the client), the ``symbol`` in HyperDex's style (``UNKNOWNSPACE``) and a ``message`` for people.
``NOTFOUND`` and ``CMPFAIL`` are normally not raised: the operations return ``None`` and
``False`` for them, as HyperDex's binding does; their classes exist for completeness.
"""

from __future__ import annotations

from typing import Dict, Type

__all__ = [
    "ClientError",
    "HyperDexClientException",
    "NotFoundError",
    "CmpFailError",
    "UnknownSpaceError",
    "DuplicateSpaceError",
    "UnknownAttributeError",
    "WrongTypeError",
    "BadDescriptionError",
    "BadPredicateError",
    "TooLargeError",
    "MalformedError",
    "BadProtocolError",
    "ReconfigureError",
    "ReadOnlyError",
    "UnavailableError",
    "InternalError",
    "TooFewServersError",
    "RequestTimeoutError",
    "BadAlterationError",
    "UnauthorizedError",
    "ConnectionFailedError",
    "ProtocolError",
    "error_class",
]


class ClientError(Exception):
    """An operation failed. ``status`` is the numeric code, ``symbol`` its name."""

    #: The symbol this class stands for; ``ClientError`` itself is used for unknown symbols.
    SYMBOL: str = ""

    def __init__(self, status: int, symbol: str, message: str) -> None:
        super().__init__(status, symbol, message)
        self.status: int = status
        self.symbol: str = symbol
        self.message: str = message

    def __str__(self) -> str:
        return f"{self.symbol} ({self.status}): {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status!r}, {self.symbol!r}, {self.message!r})"


#: The name HyperDex's Python binding gave its one exception class, for ported code.
HyperDexClientException = ClientError


class NotFoundError(ClientError):
    """NOTFOUND (8001): the key has no object. Operations return ``None`` instead."""

    SYMBOL = "NOTFOUND"


class CmpFailError(ClientError):
    """CMPFAIL (8002): a condition failed, or an atomic operation could not apply (overflow,
    division by zero). Operations return ``False`` instead."""

    SYMBOL = "CMPFAIL"


class UnknownSpaceError(ClientError):
    """UNKNOWNSPACE (8003): no space of that name."""

    SYMBOL = "UNKNOWNSPACE"


class DuplicateSpaceError(ClientError):
    """DUPLICATE (8004): ``add_space`` of a name that exists."""

    SYMBOL = "DUPLICATE"


class UnknownAttributeError(ClientError):
    """UNKNOWNATTR (8005): the request names an attribute the space does not have."""

    SYMBOL = "UNKNOWNATTR"


class WrongTypeError(ClientError):
    """WRONGTYPE (8006): a value does not fit its attribute's type, an operation or predicate
    does not apply to it, or a Python value cannot be sent at all (``bool``, ``None``, an int
    outside the signed 64-bit range, an unsupported type)."""

    SYMBOL = "WRONGTYPE"


class BadDescriptionError(ClientError):
    """BADDESCRIPTION (8007): a space description that does not parse or is not valid; the
    message starts with ``line:column``."""

    SYMBOL = "BADDESCRIPTION"


class BadPredicateError(ClientError):
    """BADPREDICATE (8008): a predicate that is not valid (a regex that does not compile)."""

    SYMBOL = "BADPREDICATE"


class TooLargeError(ClientError):
    """TOOLARGE (8009): a key, object, description or request over its limit."""

    SYMBOL = "TOOLARGE"


class MalformedError(ClientError):
    """MALFORMED (8010): the server could not decode a request."""

    SYMBOL = "MALFORMED"


class BadProtocolError(ClientError):
    """BADPROTOCOL (8011): the server does not speak this client's protocol version, or its port
    speaks TLS and the client was not given ``tls_ca``."""

    SYMBOL = "BADPROTOCOL"


class ReconfigureError(ClientError):
    """RECONFIGURE (8012): the configuration changed under the request; retry."""

    SYMBOL = "RECONFIGURE"


class ReadOnlyError(ClientError):
    """READONLY (8013): the server refuses writes after a storage failure."""

    SYMBOL = "READONLY"


class UnavailableError(ClientError):
    """UNAVAILABLE (8014): the server is shutting down or overloaded; retry later."""

    SYMBOL = "UNAVAILABLE"


class InternalError(ClientError):
    """INTERNAL (8015): a bug or an unexpected storage error; the message says more."""

    SYMBOL = "INTERNAL"


class TooFewServersError(ClientError):
    """TOOFEWSERVERS (8016): ``add_space`` of a space that needs more replicas (``tolerate N
    failures`` + 1) than the cluster has servers; nothing changed."""

    SYMBOL = "TOOFEWSERVERS"


class RequestTimeoutError(ClientError):
    """TIMEOUT (8017): no outcome within the client's deadline (10 s by default, retries
    included), or the key's point leader changed while the write was in flight. The message
    says which: a write that was sent and never answered may or may not have been applied
    (read the key before sending a non-idempotent write again); a request whose every attempt
    was refused was not applied. Named so as not to shadow Python's own ``TimeoutError``."""

    SYMBOL = "TIMEOUT"


class BadAlterationError(ClientError):
    """BADALTER (8019): ``Admin.alter_space`` of a change that cannot apply to the space as it
    stands: an attribute that is unknown, repeated, the key or not a string, int or float; a
    subspace over those attributes already; another subspace still being built (wait for it
    with ``Admin.wait_built``); a subspace id the space does not have (or has dropped); the key
    subspace 0; every one of the space's 32 subspace ids used. Nothing changed."""

    SYMBOL = "BADALTER"


class UnauthorizedError(ClientError):
    """UNAUTHORIZED (8020): the daemon was started with ``--auth`` and this client's token is
    missing, unknown or revoked, or its role does not allow the operation (reads need
    ``read``, writes ``write``, space changes ``admin``). Nothing changed."""

    SYMBOL = "UNAUTHORIZED"


class ConnectionFailedError(ClientError):
    """CONNECTION (8100): could not connect to the server, or the connection was lost; with a
    cluster, also when no coordinator answered before the client's retries ran out (about
    10 s; the message names the coordinators tried and the last error). A write whose
    connection was lost may or may not have been applied."""

    SYMBOL = "CONNECTION"


class ProtocolError(ClientError):
    """PROTOCOL (8101): the server's reply made no sense to the client."""

    SYMBOL = "PROTOCOL"


_BY_SYMBOL: Dict[str, Type[ClientError]] = {
    cls.SYMBOL: cls
    for cls in (
        NotFoundError,
        CmpFailError,
        UnknownSpaceError,
        DuplicateSpaceError,
        UnknownAttributeError,
        WrongTypeError,
        BadDescriptionError,
        BadPredicateError,
        TooLargeError,
        MalformedError,
        BadProtocolError,
        ReconfigureError,
        ReadOnlyError,
        UnavailableError,
        InternalError,
        TooFewServersError,
        RequestTimeoutError,
        BadAlterationError,
        UnauthorizedError,
        ConnectionFailedError,
        ProtocolError,
    )
}


def error_class(symbol: str) -> Type[ClientError]:
    """The ``ClientError`` subclass for a status symbol (``ClientError`` for an unknown one)."""
    return _BY_SYMBOL.get(symbol, ClientError)


def from_native(error: BaseException) -> ClientError:
    """The ``ClientError`` for a ``NativeError`` (args ``(symbol, code, message)``)."""
    args = error.args
    if len(args) == 3 and isinstance(args[0], str) and isinstance(args[1], int):
        symbol, code, message = args[0], args[1], str(args[2])
    else:  # not expected from the native module; keep whatever it said
        symbol, code, message = "INTERNAL", 8015, str(error)
    return error_class(symbol)(code, symbol, message)
