"""Requests to the native module and HyperDex's return conventions, shared by ``Client``,
``Deferred``, ``tesseradb.aio.Client`` and ``Admin``.

A ``Request`` names the native operation, its arguments, what to make of its result, and
whether NOTFOUND and CMPFAIL are answers (``None`` and ``False``) rather than errors.
"""

from __future__ import annotations

from typing import (
    Any,
    Callable,
    Dict,
    Generic,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

from ._operations import OPERATIONS
from .errors import ClientError, error_class, from_native
from .predicates import Predicates, to_native

T = TypeVar("T")

#: A key: ``str`` or ``bytes`` (any bytes: a string is a byte string) or ``int`` for
#: ``key int`` spaces.
Key = Union[str, bytes, int]
#: Attribute values by name, as given to ``put`` and the atomic operations.
Attributes = Mapping[str, Any]
#: An object as returned by ``get``, ``search`` and ``sorted_search``.
Object = Dict[str, Any]

NativeFuncall = Tuple[str, str, Any]


def _identity(result: Any) -> Any:
    return result


def _true(result: Any) -> bool:
    return True


def _int(result: Any) -> int:
    return int(result)


class Request(Generic[T]):
    """One native call: ``op``, ``args``, and the conversion of its outcome."""

    __slots__ = ("op", "args", "post", "answers")

    def __init__(
        self,
        op: str,
        args: Tuple[Any, ...],
        post: Callable[[Any], T],
        answers: bool = False,
    ) -> None:
        self.op = op
        self.args = args
        self.post = post
        # True when NOTFOUND means ``None`` and CMPFAIL means ``False``.
        self.answers = answers

    def done(self, result: Any) -> T:
        return self.post(result)

    def failed(self, native_error: BaseException) -> T:
        """The answer for a NativeError, or raises the ClientError it stands for."""
        error = from_native(native_error)
        if self.answers:
            if error.symbol == "NOTFOUND":
                return None  # type: ignore[return-value]
            if error.symbol == "CMPFAIL":
                return False  # type: ignore[return-value]
        raise error from None


# Atomic families: the HyperDex method name -> the native funcall op (from the one table).
ATOMICS: Dict[str, str] = {op.name: op.native for op in OPERATIONS}


def funcalls(op: str, attrs: Attributes) -> List[NativeFuncall]:
    if not isinstance(attrs, Mapping):
        raise TypeError(f"attributes must be a dict {{name: value}}, not {type(attrs).__name__}")
    out: List[NativeFuncall] = []
    for attr, value in attrs.items():
        if not isinstance(attr, str):
            raise TypeError(f"attribute names are str, not {type(attr).__name__}: {attr!r}")
        out.append((attr, op, value))
    return out


def get(space: str, key: Key) -> Request[Optional[Object]]:
    return Request("get", (space, key), _identity, answers=True)


def multi_get(space: str, keys: Sequence[Key]) -> Request[List[Optional[Object]]]:
    if isinstance(keys, (str, bytes)):
        raise TypeError("multi_get takes a list of keys, not one key")
    return Request("multi_get", (space, list(keys)), _identity)


def get_partial(space: str, key: Key, attrs: Sequence[str]) -> Request[Optional[Object]]:
    if isinstance(attrs, str):
        raise TypeError("get_partial takes a list of attribute names, not one str")
    wanted = list(attrs)

    def pick(result: Optional[Object]) -> Optional[Object]:
        if result is None:
            return None
        missing = [a for a in wanted if a not in result]
        if missing:
            # Same status the server gives for an unknown attribute anywhere else.
            message = f"unknown attribute {missing[0]!r}"
            raise error_class("UNKNOWNATTR")(8005, "UNKNOWNATTR", message)
        return {a: result[a] for a in wanted}

    return Request("get", (space, key), pick, answers=True)


def write(
    space: str,
    key: Key,
    mode: str,
    conditions: Predicates,
    calls: List[NativeFuncall],
    formula: Optional[str] = None,
) -> Request[Optional[bool]]:
    if formula is not None and not isinstance(formula, str):
        raise TypeError(f"formula= is a formula id (a str), not {type(formula).__name__}")
    args = (space, key, mode, to_native(conditions), calls, formula)
    return Request("put", args, _true, answers=True)


def put(
    space: str, key: Key, attrs: Attributes, formula: Optional[str] = None
) -> Request[Optional[bool]]:
    return write(space, key, "upsert", None, funcalls("set", attrs), formula)


def multi_put(
    space: str, items: Mapping[Key, Attributes]
) -> Request[Dict[Key, Optional[ClientError]]]:
    if not isinstance(items, Mapping):
        raise TypeError("multi_put takes a dict of key -> attributes")
    keys = list(items)
    native = [(k, funcalls("set", items[k])) for k in keys]

    def per_key(outcomes: List[Any]) -> Dict[Key, Optional[ClientError]]:
        result: Dict[Key, Optional[ClientError]] = {}
        for key, outcome in zip(keys, outcomes):
            if outcome is None:
                result[key] = None
            else:
                symbol, code, message = outcome
                result[key] = error_class(symbol)(code, symbol, message)
        return result

    return Request("multi_put", (space, native), per_key)


def put_if_not_exist(
    space: str, key: Key, attrs: Attributes, formula: Optional[str] = None
) -> Request[Optional[bool]]:
    return write(space, key, "create", None, funcalls("set", attrs), formula)


def cond_put(
    space: str, key: Key, predicates: Predicates, attrs: Attributes, formula: Optional[str] = None
) -> Request[Optional[bool]]:
    return write(space, key, "update", predicates, funcalls("set", attrs), formula)


def cond_put_or_create(
    space: str, key: Key, predicates: Predicates, attrs: Attributes, formula: Optional[str] = None
) -> Request[Optional[bool]]:
    return write(space, key, "upsert", predicates, funcalls("set", attrs), formula)


def atomic(
    space: str, key: Key, op: str, attrs: Attributes, predicates: Predicates = None
) -> Request[Optional[bool]]:
    return write(space, key, "update", predicates, funcalls(op, attrs))


def group_atomic(space: str, predicates: Predicates, op: str, attrs: Attributes) -> Request[int]:
    return Request("group_update", (space, to_native(predicates), funcalls(op, attrs)), _int)


def delete(space: str, key: Key, predicates: Predicates = None) -> Request[Optional[bool]]:
    return Request("del", (space, key, to_native(predicates)), _true, answers=True)


def group_del(space: str, predicates: Predicates) -> Request[int]:
    return Request("group_del", (space, to_native(predicates)), _int)


def count(space: str, predicates: Predicates) -> Request[int]:
    return Request("count", (space, to_native(predicates)), _int)


def search(space: str, predicates: Predicates) -> Request[List[Object]]:
    return Request("search", (space, to_native(predicates)), list)


def sorted_search(
    space: str, predicates: Predicates, sort_by: str, limit: int, maxmin: str
) -> Request[List[Object]]:
    if maxmin not in ("max", "min"):
        raise ValueError(f'sorted_search direction must be "max" or "min", not {maxmin!r}')
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"sorted_search limit must be a non-negative int, not {limit!r}")
    args = (space, to_native(predicates), sort_by, limit, maxmin == "max")
    return Request("sorted_search", args, list)


def get_by_range(
    space: str, start: Key, end: Key, limit: Optional[int] = None
) -> Request[List[Object]]:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"get_by_range limit must be a non-negative int or None, not {limit!r}")
    return Request("get_by_range", (space, start, end, limit), list)


def get_by_tags(space: str, tags: Sequence[str]) -> Request[List[Object]]:
    if isinstance(tags, (str, bytes)):
        raise TypeError("get_by_tags takes a list of tags, not one str")
    tags = list(tags)
    for t in tags:
        if not isinstance(t, str):
            raise TypeError(f"tags are str, not {type(t).__name__}: {t!r}")
    return Request("get_by_tags", (space, tags), list)


def describe_explanation(e: Mapping[str, Any]) -> str:
    """The text of ``search_describe`` for the native ``explain`` result."""
    servers = e["servers_contacted"]
    on = f"{servers} server{'' if servers == 1 else 's'}"
    each = e.get("servers_each_region", servers)
    if each != servers:
        # A cluster read asks the fewest servers holding every region it needs.
        on += f" ({each} asking one replica per region)"
    parts = e.get("parts", [])
    if len(parts) > 1:
        # Several subspaces read (compression formulas): the total, then a line per part.
        read = ", ".join(str(p["subspace"]) for p in parts)
        lines = [f"{e['regions_contacted']} regions in subspaces {read}, {on}"]
    else:
        lines = [
            f"subspace {e['subspace']} ({', '.join(e['dimensions'])}): "
            f"{e['regions_contacted']} of {e['subspace_regions']} regions, {on}"
        ]
    for c in e.get("candidates", []):
        n = c["regions"]
        lines.append(f"  candidate subspace {c['subspace']}: {n} region{'' if n == 1 else 's'}")
    known = e.get("shapes_known", 0)
    if known:
        read = e.get("shapes_read", [])
        lines.append(f"reads {len(read)} of {known} shapes of document:")
        for shape in read:
            lines.append("  {" + ", ".join(f"{p}: {k}" for p, k in shape.items()) + "}")
    if any(f != "" for part in parts for f in part["formulas"]):
        # Compression formulas: which overlay each formula's documents are read from.
        for part in parts:
            n = part["regions"]
            formulas = ", ".join(repr(f) for f in part["formulas"])
            pointer = ", pointers: each match read by key" if part.get("pointer") else ""
            lines.append(
                f"  part: subspace {part['subspace']} ({', '.join(part['dimensions'])}) "
                f"for formulas {formulas}: {n} region{'' if n == 1 else 's'}{pointer}"
            )
    return "\n".join(lines)


def search_describe(space: str, predicates: Predicates) -> Request[str]:
    return Request("explain", (space, to_native(predicates)), describe_explanation)
