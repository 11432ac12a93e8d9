"""nova.tree_util: pytree utilities (as jax.tree_util)."""

from nova.core.pytree import (  # noqa: F401
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    PyTreeDef,
    SequenceKey,
    keystr,
    register_dataclass,
    register_pytree_node,
    tree_all,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_leaves_with_path,
    tree_map,
    tree_map_with_path,
    tree_reduce,
    tree_structure,
    tree_unflatten,
)
