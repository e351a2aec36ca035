"""Search predicates, with the class names of HyperDex's Python binding.

A search or a condition is a dict ``{attribute: what}`` whose entries are ANDed. ``what`` is

* a plain value: the attribute equals it;
* a ``(lo, hi)`` tuple: ``lo <= attribute <= hi`` (the same as ``Range(lo, hi)``);
* a predicate object below;
* a list of predicate objects (or tuples): all of them hold.

``{}`` matches every object.

In a dynamic space, attributes are property paths (``"venue.name"``) and ``Exists`` and
``Missing`` ask for structure.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple

__all__ = [
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
    "Predicates",
    "to_native",
]


class Predicate:
    """A condition on one attribute. ``op`` is the wire name, ``arg`` its argument."""

    op: str = ""

    def __init__(self, arg: Any) -> None:
        self.arg: Any = arg

    def native_arg(self) -> Any:
        return self.arg

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        assert isinstance(other, Predicate)
        return bool(self.native_arg() == other.native_arg())

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self.native_arg())))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.arg!r})"


class Equals(Predicate):
    """``attribute == value`` (what a plain value means)."""

    op = "equals"


class LessThan(Predicate):
    """``attribute < value``."""

    op = "less"


class LessEqual(Predicate):
    """``attribute <= value``."""

    op = "less_equal"


class GreaterThan(Predicate):
    """``attribute > value``."""

    op = "greater"


class GreaterEqual(Predicate):
    """``attribute >= value``."""

    op = "greater_equal"


class Range(Predicate):
    """``lo <= attribute <= hi``, inclusive on both ends, as in HyperDex."""

    op = "range"

    def __init__(self, lo: Any, hi: Any) -> None:
        super().__init__((lo, hi))
        self.lo: Any = lo
        self.hi: Any = hi

    def __repr__(self) -> str:
        return f"Range({self.lo!r}, {self.hi!r})"


class Regex(Predicate):
    """The regular expression (Rust ``regex`` syntax) matches somewhere in a string attribute;
    anchor it with ``^``/``$`` to match the whole value."""

    op = "regex"

    def __init__(self, pattern: str) -> None:
        if not isinstance(pattern, str):
            raise TypeError(f"Regex needs a str pattern, not {type(pattern).__name__}")
        super().__init__(pattern)


class _Length(Predicate):
    def __init__(self, length: int) -> None:
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise TypeError(f"{type(self).__name__} needs a non-negative int, not {length!r}")
        super().__init__(length)


class LengthEquals(_Length):
    """The string, list, set or map has exactly this many bytes/elements/entries."""

    op = "length_equals"


class LengthLessEqual(_Length):
    """The string, list, set or map has at most this many bytes/elements/entries."""

    op = "length_less_equal"


class LengthGreaterEqual(_Length):
    """The string, list, set or map has at least this many bytes/elements/entries."""

    op = "length_greater_equal"


class Contains(Predicate):
    """An element of a list or set, a key of a map, or a substring of a string."""

    op = "contains"


class Exists(Predicate):
    """Dynamic spaces: the document has the property, or one of the properties named
    (``{"author": Exists("editor")}``: an author or an editor)."""

    op = "exists"

    def __init__(self, *alternatives: str) -> None:
        for a in alternatives:
            if not isinstance(a, str):
                raise TypeError(f"Exists takes property paths (str), not {a!r}")
        super().__init__(list(alternatives))

    def __repr__(self) -> str:
        return f"Exists({', '.join(repr(a) for a in self.arg)})"


class Missing(Predicate):
    """Dynamic spaces: the document does not have the property."""

    op = "missing"

    def __init__(self) -> None:
        super().__init__(None)

    def __repr__(self) -> str:
        return "Missing()"


#: What a search or a condition accepts: ``{attribute: value | (lo, hi) | Predicate | [..]}``.
Predicates = Optional[Mapping[str, Any]]

NativePredicate = Tuple[str, str, Any]


def _one(attr: str, what: Any) -> NativePredicate:
    if isinstance(what, Predicate):
        return (attr, what.op, what.native_arg())
    if isinstance(what, tuple):
        if len(what) != 2:
            raise ValueError(
                f"predicate on {attr!r}: a tuple means a range and needs exactly (lo, hi), "
                f"got {len(what)} items"
            )
        return (attr, "range", (what[0], what[1]))
    return (attr, "equals", what)


def _is_predicate_list(what: Any) -> bool:
    return (
        isinstance(what, list)
        and len(what) > 0
        and all(isinstance(p, (Predicate, tuple)) for p in what)
    )


def to_native(predicates: Predicates) -> List[NativePredicate]:
    """The native module's form of ``predicates``: a list of ``(attr, op, arg)``.

    A list of predicate objects on one attribute ANDs them; any other list is a plain value
    (equality with a list attribute).
    """
    if predicates is None:
        return []
    if not isinstance(predicates, Mapping):
        raise TypeError(
            f"predicates must be a dict {{attribute: value or predicate}}, "
            f"not {type(predicates).__name__}"
        )
    out: List[NativePredicate] = []
    for attr, what in predicates.items():
        if not isinstance(attr, str):
            raise TypeError(f"attribute names are str, not {type(attr).__name__}: {attr!r}")
        if _is_predicate_list(what):
            out.extend(_one(attr, p) for p in what)
        else:
            out.append(_one(attr, what))
    return out

