"""nova.tree_util: pytree utilities (as jax.tree_util)."""

from nova.core.pytree import (  # noqa: F401
    PyTreeDef,
    register_dataclass,
    register_pytree_node,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_structure,
    tree_unflatten,
)
