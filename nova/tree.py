"""nova.tree: the pytree functions under short names (as jax.tree): `nova.tree.map(f, t)` is
`nova.tree_util.tree_map(f, t)`, and so on. See nova/core/pytree.py."""

from nova.core.pytree import (
    tree_all as all,  # noqa: A004 (the short names shadow builtins, as jax.tree's do)
    tree_broadcast as broadcast,
    tree_flatten as flatten,
    tree_flatten_with_path as flatten_with_path,
    tree_leaves as leaves,
    tree_leaves_with_path as leaves_with_path,
    tree_map as map,  # noqa: A004
    tree_map_with_path as map_with_path,
    tree_reduce as reduce,
    tree_reduce_associative as reduce_associative,
    tree_structure as structure,
    tree_transpose as transpose,
    tree_unflatten as unflatten,
)

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "structure", "transpose",
           "unflatten"]

