"""Requests to the native module and HyperDex's return conventions, shared by ``Client``,
``Deferred``, ``tesseradb.aio.Client`` and ``Admin``.

A ``Request`` names the native operation, its arguments, what to make of its result, and
whether NOTFOUND and CMPFAIL are answers (``None`` and ``False``) rather than errors. Every
operation's builder is written at the end of this file by ``scripts/gen-python-ops.py`` from
its row of ``_operations.CALLS``; the atomic operations' two are written by hand below, one
for all 32. By hand too: the checks and conversions of arguments and of results that the
table names.
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
from .errors import ClientError, UnknownSpaceError, error_class, from_native
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


# ---- results: what each operation makes of the native module's answer ----------------------


def identity(result: Any) -> Any:
    return result


def true(result: Any) -> bool:
    return True


def pick(attrs: Sequence[str]) -> Callable[[Optional[Object]], Optional[Object]]:
    """get_partial's result: only ``attrs`` of the object (each must be an attribute)."""
    if isinstance(attrs, str):
        raise TypeError("get_partial takes a list of attribute names, not one str")
    wanted = list(attrs)

    def picked(result: Optional[Object]) -> Optional[Object]:
        if result is None:
            return None
        missing = [a for a in wanted if a not in result]
        if missing:
            # Same status the server gives for an unknown attribute anywhere else.
            message = f"unknown attribute {missing[0]!r}"
            raise error_class("UNKNOWNATTR")(8005, "UNKNOWNATTR", message)
        return {a: result[a] for a in wanted}

    return picked


def per_key(
    items: Mapping[Key, Attributes],
) -> Callable[[List[Any]], Dict[Key, Optional[ClientError]]]:
    """multi_put's result: per key of ``items``, None when stored, else the error."""
    keys = list(items)

    def outcomes(native: List[Any]) -> Dict[Key, Optional[ClientError]]:
        result: Dict[Key, Optional[ClientError]] = {}
        for key, outcome in zip(keys, native):
            if outcome is None:
                result[key] = None
            else:
                symbol, code, message = outcome
                result[key] = error_class(symbol)(code, symbol, message)
        return result

    return outcomes


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


def space_names(spaces: List[Dict[str, Any]]) -> List[str]:
    return [s["name"] for s in spaces]


def _space(spaces: List[Dict[str, Any]], space: str) -> Dict[str, Any]:
    for s in spaces:
        if s["name"] == space:
            return s
    raise UnknownSpaceError(8003, "UNKNOWNSPACE", f"no space named {space!r}")


def subspaces_of(space: str) -> Callable[[List[Dict[str, Any]]], List[List[str]]]:
    """list_subspaces's result, from every space's schema: the key's subspace first."""

    def subspaces(spaces: List[Dict[str, Any]]) -> List[List[str]]:
        s = _space(spaces, space)
        return [[s["key"]]] + [list(sub) for sub in s["subspaces"]]

    return subspaces


def schema_of(space: str) -> Callable[[List[Dict[str, Any]]], Dict[str, Any]]:
    """describe_space's result, from every space's schema."""
    return lambda spaces: dict(_space(spaces, space))


# ---- arguments: checked and converted before anything is sent ------------------------------


def funcalls(op: str, attrs: Attributes) -> List[NativeFuncall]:
    if not isinstance(attrs, Mapping):
        raise TypeError(f"attributes must be a dict {{name: value}}, not {type(attrs).__name__}")
    out: List[NativeFuncall] = []
    for attr, value in attrs.items():
        if not isinstance(attr, str):
            raise TypeError(f"attribute names are str, not {type(attr).__name__}: {attr!r}")
        out.append((attr, op, value))
    return out


def write(
    space: str,
    key: Key,
    mode: str,
    conditions: Predicates,
    calls: List[NativeFuncall],
    formula: Optional[str] = None,
) -> Tuple[Any, ...]:
    """The native put's arguments (the changes are checked first, by ``funcalls``)."""
    if formula is not None and not isinstance(formula, str):
        raise TypeError(f"formula= is a formula id (a str), not {type(formula).__name__}")
    return (space, key, mode, to_native(conditions), calls, formula)


def key_list(keys: Sequence[Key]) -> List[Key]:
    if isinstance(keys, (str, bytes)):
        raise TypeError("multi_get takes a list of keys, not one key")
    return list(keys)


def puts(items: Mapping[Key, Attributes]) -> List[Tuple[Key, List[NativeFuncall]]]:
    if not isinstance(items, Mapping):
        raise TypeError("multi_put takes a dict of key -> attributes")
    return [(k, funcalls("set", items[k])) for k in list(items)]


def check_sorted(limit: int, maxmin: str) -> None:
    if maxmin not in ("max", "min"):
        raise ValueError(f'sorted_search direction must be "max" or "min", not {maxmin!r}')
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"sorted_search limit must be a non-negative int, not {limit!r}")


def range_limit(limit: Optional[int]) -> Optional[int]:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"get_by_range limit must be a non-negative int or None, not {limit!r}")
    return limit


def tag_list(tags: Sequence[str]) -> List[str]:
    if isinstance(tags, (str, bytes)):
        raise TypeError("get_by_tags takes a list of tags, not one str")
    tags = list(tags)
    for t in tags:
        if not isinstance(t, str):
            raise TypeError(f"tags are str, not {type(t).__name__}: {t!r}")
    return tags


def overlay_list(overlays: Sequence[str]) -> List[str]:
    if isinstance(overlays, (str, bytes)) or not all(isinstance(o, str) for o in overlays):
        raise TypeError('overlays is a list of overlays, e.g. ["year*4,venue.name", "doi"]')
    return list(overlays)


def formula_id(id: Optional[str]) -> Optional[str]:
    if id is not None and not isinstance(id, str):
        raise TypeError(f"id is a str or None, not {type(id).__name__}")
    return id


def flag(on: bool) -> bool:
    if not isinstance(on, bool):
        raise TypeError("on is True or False")
    return on


def seconds(timeout: Optional[float]) -> Optional[float]:
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout >= 0):
        raise ValueError(f"timeout must be a number of seconds >= 0 or None, not {timeout!r}")
    return None if timeout is None else float(timeout)


# ---- the atomic operations: two builders for the 32 rows of _operations.OPERATIONS ---------

# Atomic families: the HyperDex method name -> the native funcall op (from the one table).
ATOMICS: Dict[str, str] = {op.name: op.native for op in OPERATIONS}


def atomic(
    space: str, key: Key, op: str, attrs: Attributes, predicates: Predicates = None
) -> Request[Optional[bool]]:
    args = write(space, key, "update", predicates, funcalls(op, attrs))
    return Request("put", args, true, answers=True)


def group_atomic(space: str, predicates: Predicates, op: str, attrs: Attributes) -> Request[int]:
    return Request("group_update", (space, to_native(predicates), funcalls(op, attrs)), int)


# ---- every other operation's request, from its row of _operations.CALLS --------------------

# BEGIN GENERATED by scripts/gen-python-ops.py from _operations.py: the requests. Do not edit.
def get(space: str, key: Key) -> Request[Optional[Object]]:
    return Request("get", (space, key), identity, answers=True)


def get_partial(space: str, key: Key, attrs: Sequence[str]) -> Request[Optional[Object]]:
    return Request("get", (space, key), pick(attrs), answers=True)


def multi_get(space: str, keys: Sequence[Key]) -> Request[List[Optional[Object]]]:
    return Request("multi_get", (space, key_list(keys)), identity)


def multi_put(
    space: str, items: Mapping[Key, Attributes]
) -> Request[Dict[Key, Optional[ClientError]]]:
    return Request("multi_put", (space, puts(items)), per_key(items))


def put(
    space: str, key: Key, attrs: Attributes, formula: Optional[str] = None
) -> Request[Optional[bool]]:
    return Request(
        "put",
        write(space, key, "upsert", None, funcalls("set", attrs), formula),
        true,
        answers=True,
    )


def put_if_not_exist(
    space: str, key: Key, attrs: Attributes, formula: Optional[str] = None
) -> Request[Optional[bool]]:
    return Request(
        "put",
        write(space, key, "create", None, funcalls("set", attrs), formula),
        true,
        answers=True,
    )


def cond_put(
    space: str, key: Key, predicates: Predicates, attrs: Attributes, formula: Optional[str] = None
) -> Request[Optional[bool]]:
    return Request(
        "put",
        write(space, key, "update", predicates, funcalls("set", attrs), formula),
        true,
        answers=True,
    )


def cond_put_or_create(
    space: str, key: Key, predicates: Predicates, attrs: Attributes, formula: Optional[str] = None
) -> Request[Optional[bool]]:
    return Request(
        "put",
        write(space, key, "upsert", predicates, funcalls("set", attrs), formula),
        true,
        answers=True,
    )


def delete(space: str, key: Key) -> Request[Optional[bool]]:
    return Request("del", (space, key, []), true, answers=True)


def cond_del(space: str, key: Key, predicates: Predicates) -> Request[Optional[bool]]:
    return Request("del", (space, key, to_native(predicates)), true, answers=True)


def group_del(space: str, predicates: Predicates) -> Request[int]:
    return Request("group_del", (space, to_native(predicates)), int)


def count(space: str, predicates: Predicates) -> Request[int]:
    return Request("count", (space, to_native(predicates)), int)


def search(space: str, predicates: Predicates) -> Request[List[Object]]:
    return Request("search", (space, to_native(predicates)), list)


def sorted_search(
    space: str, predicates: Predicates, sort_by: str, limit: int, maxmin: str
) -> Request[List[Object]]:
    check_sorted(limit, maxmin)
    return Request(
        "sorted_search", (space, to_native(predicates), sort_by, limit, maxmin == "max"), list
    )


def get_by_range(
    space: str, start: Key, end: Key, limit: Optional[int] = None
) -> Request[List[Object]]:
    return Request("get_by_range", (space, start, end, range_limit(limit)), list)


def get_by_tags(space: str, tags: Sequence[str]) -> Request[List[Object]]:
    return Request("get_by_tags", (space, tag_list(tags)), list)


def search_describe(space: str, predicates: Predicates) -> Request[str]:
    return Request("explain", (space, to_native(predicates)), describe_explanation)


def add_space(description: str) -> Request[bool]:
    return Request("add_space", (description,), true)


def rm_space(space: str) -> Request[bool]:
    return Request("rm_space", (space,), true)


def add_formula(space: str, overlays: Sequence[str], id: Optional[str] = None) -> Request[str]:
    return Request("add_formula", (space, overlay_list(overlays), formula_id(id)), str)


def set_adapt(space: str, on: bool) -> Request[bool]:
    return Request("set_adapt", (space, flag(on)), true)


def adaptations(space: str) -> Request[List[Dict[str, Any]]]:
    return Request("adaptations", (space,), list)


def subspaces(space: str) -> Request[List[Dict[str, Any]]]:
    return Request("subspaces", (space,), list)


def wait_built(space: str, timeout: Optional[float] = 60.0) -> Request[List[Dict[str, Any]]]:
    return Request("wait_built", (space, seconds(timeout)), list)


def list_spaces() -> Request[List[str]]:
    return Request("list_spaces", (), space_names)


def list_subspaces(space: str) -> Request[List[List[str]]]:
    return Request("list_spaces", (), subspaces_of(space))


def describe_space(space: str) -> Request[Dict[str, Any]]:
    return Request("list_spaces", (), schema_of(space))
# END GENERATED: the requests
