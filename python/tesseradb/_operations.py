"""The client's whole surface as two tables, from which ``scripts/gen-python-ops.py`` writes
every operation's request builder (in ``_requests.py``) and its methods on ``Client`` (the
blocking form and its ``async_`` Deferred), on ``tesseradb.aio.Client`` and on ``Admin``, as
HyperDex generated every binding from one list. The generated code is never edited by hand;
what is left by hand in those classes is connection lifecycle and the few operations that are
not one request (each says why).

``CALLS``: one row per operation. Its method's name, parameters and result type (as in the
signature; ``async_`` forms answer ``Deferred[result]``, aio's ``Answer[result]``), the native
module's operation, the native arguments (a tuple expression over the parameters, evaluated
left to right: the helpers of ``_requests`` it calls check and convert them, so a bad argument
raises before anything is sent), the conversion of the native result (a function of
``_requests``), whether HyperDex's conventions make NOTFOUND an answer (``None``) and CMPFAIL
one (``False``) rather than errors, a ``check`` run before the arguments are built, the
docstring, aio's docstring where it differs, and the surfaces that have the operation.

``OPERATIONS``: HyperDex's 32 atomic operations, each the three forms ``op``, ``cond_op`` and
``group_op`` on every client surface. Each row: the operation's HyperDex name, the native
module's name for it (a funcall of tessera-client: ``num_*`` on ints and floats,
``map_num_*`` on a map's values, the others by their own name; ``tests/test_operations.py``
checks them against the native module), and what it does to the attribute, for the
docstrings. Their requests are built by ``_requests.atomic`` and ``_requests.group_atomic``.

Standard library only: the generator reads this file without the native module.
"""

from typing import NamedTuple, Tuple

#: The surfaces of the client's three forms (``Client``, its ``async_`` forms, ``aio.Client``).
CLIENT = ("client", "async_", "aio")


class Call(NamedTuple):
    name: str
    params: str
    returns: str
    native: str
    args: str
    post: str
    answers: bool = False
    check: str = ""
    doc: str = ""
    aio_doc: str = ""
    forms: Tuple[str, ...] = CLIENT


WRITE = "space: str, key: Key, attrs: Attributes, *, formula: Optional[str] = None"
COND_WRITE = (
    "space: str, key: Key, predicates: Predicates, attrs: Attributes, *, "
    "formula: Optional[str] = None"
)

# Docstrings: the text as the method shows it, without the indentation of its lines.
CALLS: Tuple[Call, ...] = (
    Call(
        "get",
        "space: str, key: Key",
        "Optional[Object]",
        "get",
        "(space, key)",
        "identity",
        answers=True,
        doc="The object's attributes (without the key), or None if the key has no object.",
    ),
    Call(
        "get_partial",
        "space: str, key: Key, attrs: Sequence[str]",
        "Optional[Object]",
        "get",
        "(space, key)",
        "pick(attrs)",
        answers=True,
        doc="Only the named attributes of the object, or None if the key has no object.",
    ),
    Call(
        "multi_get",
        "space: str, keys: Sequence[Key]",
        "List[Optional[Object]]",
        "multi_get",
        "(space, key_list(keys))",
        "identity",
        doc="""
The objects of ``keys``, in their order, None for a key with no object. Each key is
read as ``get`` reads it (in a cluster, each point leader is asked once for all its
keys); the keys are not read as one snapshot.""",
        aio_doc="""
The objects of ``keys``, in their order, None for a key with no object (each read
as ``get`` reads it; not one snapshot).""",
    ),
    Call(
        "multi_put",
        "space: str, items: Mapping[Key, Attributes]",
        "Dict[Key, Optional[ClientError]]",
        "multi_put",
        "(space, puts(items))",
        "per_key(items)",
        doc="""
Put each key's attributes as ``put`` would. Not a transaction: each put succeeds or
fails on its own (a failed one changes nothing of its key, the others stay stored).
Returns, per key, None when it was stored, else the ``ClientError`` that refused it;
a malformed argument raises before anything is written.""",
        aio_doc="""
Put each key's attributes as ``put`` would; not a transaction: None per stored key,
else the ``ClientError`` that refused it.""",
        # Not in HyperDex's Deferred set: no async_multi_put.
        forms=("client", "aio"),
    ),
    Call(
        "put",
        WRITE,
        "Optional[bool]",
        "put",
        'write(space, key, "upsert", None, funcalls("set", attrs), formula)',
        "true",
        answers=True,
        doc="""
Create the object, or update the attributes given (others keep their values). True.

``formula`` (a dynamic space only) places the document by that compression formula
(an id ``Admin.add_formula`` returned; ``""`` for the default, the unispace); the
document keeps it until a put names another.""",
    ),
    Call(
        "put_if_not_exist",
        WRITE,
        "Optional[bool]",
        "put",
        'write(space, key, "create", None, funcalls("set", attrs), formula)',
        "true",
        answers=True,
        doc="""
Create the object: True, or False if the key already has one (``formula`` as for
``put``).""",
    ),
    Call(
        "cond_put",
        COND_WRITE,
        "Optional[bool]",
        "put",
        'write(space, key, "update", predicates, funcalls("set", attrs), formula)',
        "true",
        answers=True,
        doc="""
Update an existing object if it matches predicates: True, False if it does not, None
if absent. ``formula`` as for ``put``.""",
    ),
    Call(
        "cond_put_or_create",
        COND_WRITE,
        "Optional[bool]",
        "put",
        'write(space, key, "upsert", predicates, funcalls("set", attrs), formula)',
        "true",
        answers=True,
        doc="""
Create the object, or update it if it matches predicates: True, or False if it does
not. ``formula`` as for ``put``.""",
    ),
    Call(
        "delete",
        "space: str, key: Key",
        "Optional[bool]",
        "del",
        "(space, key, [])",
        "true",
        answers=True,
        doc="Delete the object: True, or None if the key had none.",
    ),
    Call(
        "cond_del",
        "space: str, key: Key, predicates: Predicates",
        "Optional[bool]",
        "del",
        "(space, key, to_native(predicates))",
        "true",
        answers=True,
        doc="""
Delete the object if it matches predicates: True, False if it does not, None if
absent.""",
    ),
    Call(
        "group_del",
        "space: str, predicates: Predicates",
        "int",
        "group_del",
        "(space, to_native(predicates))",
        "int",
        doc="Delete every object matching predicates; the number deleted.",
    ),
    Call(
        "count",
        "space: str, predicates: Predicates",
        "int",
        "count",
        "(space, to_native(predicates))",
        "int",
        doc="The number of objects matching predicates.",
    ),
    Call(
        "search",
        "space: str, predicates: Predicates",
        "List[Object]",
        "search",
        "(space, to_native(predicates))",
        "list",
        doc="Every object matching predicates, key included, as a list.",
        # Client.search streams (an iterator over NativeClient.search_iter), by hand.
        forms=("aio",),
    ),
    Call(
        "sorted_search",
        "space: str, predicates: Predicates, sort_by: str, limit: int, maxmin: str",
        "List[Object]",
        "sorted_search",
        '(space, to_native(predicates), sort_by, limit, maxmin == "max")',
        "list",
        check="check_sorted(limit, maxmin)",
        doc="""
At most limit matching objects (key included), by sort_by: largest first for "max",
smallest first for "min".""",
    ),
    Call(
        "get_by_range",
        "space: str, start: Key, end: Key, limit: Optional[int] = None",
        "List[Object]",
        "get_by_range",
        "(space, start, end, range_limit(limit))",
        "list",
        doc="""
The objects whose keys lie in [start, end), key included, smallest key first, at
most ``limit`` of them. A space with ``placement ordered`` reads only the regions the
range overlaps; any other reads every region. Like a search, each object is a version
it had; the range is not one snapshot.""",
    ),
    Call(
        "get_by_tags",
        "space: str, tags: Sequence[str]",
        "List[Object]",
        "get_by_tags",
        "(space, tag_list(tags))",
        "list",
        doc="""
The objects (key included, in key order) whose tags include every one of ``tags``:
the set(string) attribute of the space's ``placement tagged``, or its only set(string)
attribute. A tagged space reads only the regions of the tags' cells.""",
    ),
    Call(
        "search_describe",
        "space: str, predicates: Predicates",
        "str",
        "explain",
        "(space, to_native(predicates))",
        "describe_explanation",
        doc="""
How a search for predicates would run: the subspace chosen, the regions and servers
it contacts.""",
    ),
    # Admin's (HyperDex's hyperdex.admin): blocking only.
    Call(
        "add_space",
        "description: str",
        "bool",
        "add_space",
        "(description,)",
        "true",
        doc="""
Create a space from its description (HyperDex's language). True.

Raises ``BadDescriptionError`` (the message starts with ``line:column``) or
``DuplicateSpaceError``.""",
        forms=("admin",),
    ),
    Call(
        "rm_space",
        "space: str",
        "bool",
        "rm_space",
        "(space,)",
        "true",
        doc="Remove a space and all its objects. True; ``UnknownSpaceError`` if there is none.",
        forms=("admin",),
    ),
    Call(
        "add_formula",
        "space: str, overlays: Sequence[str], *, id: Optional[str] = None",
        "str",
        "add_formula",
        "(space, overlay_list(overlays), formula_id(id))",
        "str",
        doc="""
Register a compression formula in a dynamic space and return its id once documents
can use it (``put(..., formula=id)``). Each overlay is properties joined by ``,``
with optional weights, e.g. ``["year*4,venue.name", "doi"]``: a document of the
formula is placed in every overlay, at its properties' coordinates, instead of the
unispace. Without ``id`` the id is the overlays' text joined by ``" | "``.

Overlays the space lacks become subspaces that serve at once (no document uses the
formula yet). Registering the same formula again returns its id.

Raises ``BadAlterationError`` (a malformed overlay, more properties than the space's
dimensions, an id taken by other overlays, too many formulas; nothing changed),
``UnknownSpaceError``, and ``TypeError`` for bad arguments.""",
        forms=("admin",),
    ),
    Call(
        "set_adapt",
        "space: str, on: bool",
        "bool",
        "set_adapt",
        "(space, flag(on))",
        "true",
        doc="""
Turn adaptation on or off (as ``adapt on`` in a description): whether Tessera
re-subspaces the space itself as its workload changes. With it on, the coordinators'
leader (or ``tessera dev``) scores the workload the space served each period with the
advisor, and once another configuration is predicted at least 20 % faster several
periods running, logs the decision (``adaptations``) and adds, builds and drops
subspaces to get there. True; ``UnknownSpaceError`` if there is no such space.""",
        forms=("admin",),
    ),
    Call(
        "adaptations",
        "space: str",
        "List[Dict[str, Any]]",
        "adaptations",
        "(space,)",
        "list",
        doc="""
The steps of the adaptations decided for ``space``, oldest first (the last 16 are
kept), each ``{"epoch", "term", "event", "why", "from", "to", "predicted_from_ops_s",
"predicted_to_ops_s", "observations", "period_s"}``: ``event`` is ``"started"``,
``"resumed"`` (by a new coordinator leader), ``"finished"`` or ``"abandoned"`` (then
``why`` says why; otherwise it is None), ``term`` the coordinators' Raft term the
driver acted in (0 standalone); ``from`` and ``to`` are lists of subspaces, each a list
of attribute names (the key subspace left out). ``UnknownSpaceError`` if there is no
such space.""",
        forms=("admin",),
    ),
    Call(
        "subspaces",
        "space: str",
        "List[Dict[str, Any]]",
        "subspaces",
        "(space,)",
        "list",
        doc="""
Every subspace of a space, freshly fetched, by id (the key's, 0, first; dropped ones
keep their place): ``{"id", "attributes", "state"}`` with ``state`` one of
``"serving"``, ``"building"`` (being built: also ``"backfilled"`` of ``"key_regions"``
key regions so far) or ``"dropped"``. ``UnknownSpaceError`` if there is none.""",
        forms=("admin",),
    ),
    Call(
        "wait_built",
        "space: str, timeout: Optional[float] = 60.0",
        "List[Dict[str, Any]]",
        "wait_built",
        "(space, seconds(timeout))",
        "list",
        doc="""
Wait until no subspace of ``space`` is being built, and return its ``subspaces``
then: the subspace added last serves searches (or was dropped before it was built).
Raises ``RequestTimeoutError`` if a build is still under way after ``timeout``
seconds (``None``: wait as long as it takes; the build itself goes on), saying how far
it got; ``UnknownSpaceError`` if the space is (or gets) removed.""",
        forms=("admin",),
    ),
    Call(
        "list_spaces",
        "",
        "List[str]",
        "list_spaces",
        "()",
        "space_names",
        doc="The names of the spaces.",
        forms=("admin",),
    ),
    Call(
        "list_subspaces",
        "space: str",
        "List[List[str]]",
        "list_spaces",
        "()",
        "subspaces_of(space)",
        doc="""
The subspaces of a space, each as its list of attribute names, in subspace order:
the key's subspace first (subspace 0), then those of the description and those added
by ``alter_space``, so index ``i`` is the subspace ``search_describe`` calls
``subspace i``. A dropped subspace keeps its place (ids are stable): ``subspaces``
says which are serving, building or dropped.""",
        forms=("admin",),
    ),
    Call(
        "describe_space",
        "space: str",
        "Dict[str, Any]",
        "list_spaces",
        "()",
        "schema_of(space)",
        doc="""
A space's schema: name, key, key_type, attributes, subspaces, subspace_states
(one per subspace id, the key's first: ``"serving"``, ``"building"`` or
``"dropped"``), partitions, tolerate, adapt (whether Tessera picks its subspaces, see
``set_adapt``) and its description text (which leaves out the dropped subspaces).""",
        forms=("admin",),
    ),
)


class Operation(NamedTuple):
    name: str
    native: str
    effect: str


OPERATIONS: Tuple[Operation, ...] = (
    Operation("atomic_add", "num_add", "attr += value (int or float)"),
    Operation("atomic_sub", "num_sub", "attr -= value"),
    Operation("atomic_mul", "num_mul", "attr *= value"),
    Operation("atomic_div", "num_div", "attr /= value (ints truncate toward zero)"),
    Operation("atomic_mod", "num_mod", "attr %= value (ints: sign of the dividend, as in C)"),
    Operation("atomic_and", "num_and", "attr &= value (ints)"),
    Operation("atomic_or", "num_or", "attr |= value (ints)"),
    Operation("atomic_xor", "num_xor", "attr ^= value (ints)"),
    Operation("atomic_min", "num_min", "attr = min(attr, value)"),
    Operation("atomic_max", "num_max", "attr = max(attr, value)"),
    Operation("string_prepend", "string_prepend", "attr = value + attr (strings)"),
    Operation("string_append", "string_append", "attr = attr + value (strings)"),
    Operation("list_lpush", "list_lpush", "insert value at the front of the list"),
    Operation("list_rpush", "list_rpush", "append value to the list"),
    Operation("set_add", "set_add", "add the element value to the set"),
    Operation("set_remove", "set_remove", "remove the element value from the set"),
    Operation("set_union", "set_union", "add every element of the set value"),
    Operation("set_intersect", "set_intersect", "keep only the elements also in the set value"),
    Operation("map_add", "map_add", "insert or overwrite every entry of the dict value"),
    Operation(
        "map_remove", "map_remove", "remove the entry whose key is value (absent is fine)"
    ),
    Operation(
        "map_atomic_add",
        "map_num_add",
        "map[k] += v for every k: v of the dict value (absent counts as 0)",
    ),
    Operation("map_atomic_sub", "map_num_sub", "map[k] -= v for every k: v"),
    Operation("map_atomic_mul", "map_num_mul", "map[k] *= v for every k: v"),
    Operation("map_atomic_div", "map_num_div", "map[k] /= v for every k: v"),
    Operation("map_atomic_mod", "map_num_mod", "map[k] %= v for every k: v"),
    Operation("map_atomic_and", "map_num_and", "map[k] &= v for every k: v"),
    Operation("map_atomic_or", "map_num_or", "map[k] |= v for every k: v"),
    Operation("map_atomic_xor", "map_num_xor", "map[k] ^= v for every k: v"),
    Operation("map_atomic_min", "map_num_min", "map[k] = min(map[k], v) for every k: v"),
    Operation("map_atomic_max", "map_num_max", "map[k] = max(map[k], v) for every k: v"),
    Operation("map_string_prepend", "map_string_prepend", "map[k] = s + map[k] for every k: s"),
    Operation("map_string_append", "map_string_append", "map[k] = map[k] + s for every k: s"),
)
