"""nova.tree: the pytree functions under short names (as jax.tree): `nova.tree.map(f, t)` is
`nova.tree_util.tree_map(f, t)`, and so on. See nova/core/pytree.py. (The short names shadow
builtins here, as jax.tree's do.)"""

from nova.core.pytree import tree_all as all
from nova.core.pytree import tree_broadcast as broadcast
from nova.core.pytree import tree_flatten as flatten
from nova.core.pytree import tree_flatten_with_path as flatten_with_path
from nova.core.pytree import tree_leaves as leaves
from nova.core.pytree import tree_leaves_with_path as leaves_with_path
from nova.core.pytree import tree_map as map
from nova.core.pytree import tree_map_with_path as map_with_path
from nova.core.pytree import tree_reduce as reduce
from nova.core.pytree import tree_reduce_associative as reduce_associative
from nova.core.pytree import tree_structure as structure
from nova.core.pytree import tree_transpose as transpose
from nova.core.pytree import tree_unflatten as unflatten

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "structure", "transpose",
           "unflatten"]
