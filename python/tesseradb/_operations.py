"""The one table of HyperDex's atomic operations, from which ``scripts/gen-python-ops.py``
writes their methods on ``Client`` (``op``, ``cond_op``, ``group_op`` and ``async_`` of each)
and on ``tesseradb.aio.Client``, as HyperDex generated every binding from one list.

Each row: the operation's HyperDex name, the native module's name for it (a funcall of
tessera-client: ``num_*`` on ints and floats, ``map_num_*`` on a map's values, the others by
their own name; ``tests/test_operations.py`` checks them against the native module), and what
it does to the attribute, for the docstrings. Standard library only: the generator reads this
file without the native module.
"""

from typing import NamedTuple, Tuple


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
