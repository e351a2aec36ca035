"""tesseradb: the Python client of Tessera, a searchable key-value store.

The API is HyperDex's Python binding's, so code written for HyperDex ports by changing the
import::

    import tesseradb
    c = tesseradb.Client("127.0.0.1", 1982)
    c.put("hotels", "h1", {"city": "Paris", "stars": 4, "price": 120})
    c.get("hotels", "h1")

See docs/python.md in the repository for every operation and the differences from HyperDex.
"""

from __future__ import annotations

from . import aio
from .admin import Admin
from .client import DEFAULT_HOST, DEFAULT_PORT, Client, Deferred
from .errors import (
    BadAlterationError,
    UnauthorizedError,
    BadDescriptionError,
    BadPredicateError,
    BadProtocolError,
    ClientError,
    CmpFailError,
    ConnectionFailedError,
    DuplicateSpaceError,
    HyperDexClientException,
    InternalError,
    MalformedError,
    NotFoundError,
    ProtocolError,
    ReadOnlyError,
    ReconfigureError,
    TooFewServersError,
    RequestTimeoutError,
    TooLargeError,
    UnavailableError,
    UnknownAttributeError,
    UnknownSpaceError,
    WrongTypeError,
)
from .predicates import (
    Contains,
    Exists,
    Missing,
    Equals,
    GreaterEqual,
    GreaterThan,
    LengthEquals,
    LengthGreaterEqual,
    LengthLessEqual,
    LessEqual,
    LessThan,
    Predicate,
    Range,
    Regex,
)

__all__ = [
    "Admin",
    "Client",
    "Deferred",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "aio",
    "Predicate",
    "Equals",
    "LessThan",
    "LessEqual",
    "GreaterThan",
    "GreaterEqual",
    "Range",
    "Regex",
    "LengthEquals",
    "LengthLessEqual",
    "LengthGreaterEqual",
    "Contains",
    "Exists",
    "Missing",
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
]
