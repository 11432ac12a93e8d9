"""optax.tree_utils' pytree arithmetic, norms, casts and key look-ups, written with Nova ops.

Every function maps nova.numpy ops over the leaves, so it traces under nova.jit, nova.grad and
nova.vmap. tree_map_params (mapping over the parameter-shaped parts of an optimizer state) is
here too, as in optax.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np

import nova.numpy as jnp
from nova.core.pytree import (
    DictKey,
    SequenceKey,
    register_pytree_node,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_unflatten,
)
from nova.optim.linesearch import tree_vdot as _tree_vdot

# --- arithmetic ----------------------------------------------------------------------------------


def tree_add(tree_x, tree_y, *other_trees):
    """The leafwise sum of two or more pytrees of one structure (optax.tree_utils.tree_add);
    dtypes promote as nova.numpy's `+`. Raises ValueError when the structures differ."""
    return tree_map(lambda *xs: functools.reduce(lambda a, b: a + b, xs),
                    tree_x, tree_y, *other_trees)


def tree_sub(tree_x, tree_y):
    """tree_x - tree_y leaf by leaf (optax.tree_utils.tree_sub)."""
    return tree_map(lambda x, y: x - y, tree_x, tree_y)


def tree_mul(tree_x, tree_y):
    """tree_x * tree_y leaf by leaf (optax.tree_utils.tree_mul)."""
    return tree_map(lambda x, y: x * y, tree_x, tree_y)


def tree_div(tree_x, tree_y):
    """tree_x / tree_y leaf by leaf (optax.tree_utils.tree_div)."""
    return tree_map(lambda x, y: x / y, tree_x, tree_y)


def tree_scale(scalar, tree):
    """scalar * tree for a scalar (number or 0-d array) and a pytree (optax.tree_utils.tree_scale,
    formerly tree_scalar_mul)."""
    return tree_map(lambda x: scalar * x, tree)


tree_scalar_mul = tree_scale  # optax's older name


def tree_add_scale(tree_x, scalar, tree_y):
    """tree_x + scalar * tree_y leaf by leaf (optax.tree_utils.tree_add_scale, formerly
    tree_add_scalar_mul); None leaves of tree_x stay None."""
    scalar = jnp.asarray(scalar)
    return tree_map(lambda x, y: None if x is None else x + scalar * y, tree_x, tree_y,
                    is_leaf=lambda x: x is None)


tree_add_scalar_mul = tree_add_scale  # optax's older name


def tree_vdot(tree_x, tree_y):
    """The inner product sum over leaves of vdot(x_leaf, y_leaf), a 0-d array
    (optax.tree_utils.tree_vdot; complex leaves of tree_x are conjugated, as numpy.vdot)."""
    return _tree_vdot(tree_x, tree_y)


def tree_where(condition, tree_x, tree_y):
    """where(condition, x, y) leaf by leaf (optax.tree_utils.tree_where); condition is a bool
    array broadcasting against every leaf (usually 0-d)."""
    return tree_map(lambda x, y: jnp.where(condition, x, y), tree_x, tree_y)


def tree_clip(tree, min_value=None, max_value=None):
    """Every leaf clipped to [min_value, max_value]; a None bound is not applied
    (optax.tree_utils.tree_clip)."""
    return tree_map(lambda x: jnp.clip(x, min_value, max_value), tree)


def tree_conj(tree):
    """The complex conjugate of every leaf (optax.tree_utils.tree_conj); real leaves as they
    are (as arrays)."""
    return tree_map(lambda x: jnp.conj(jnp.asarray(x)), tree)


def tree_real(tree):
    """The real part of every leaf (optax.tree_utils.tree_real): float32 for complex64,
    float64 for complex128; real leaves as they are (as arrays)."""
    return tree_map(lambda x: jnp.real(jnp.asarray(x)), tree)


def _abs_square(x):
    """|x|^2 elementwise, real for complex x (optax's squared norm of complex leaves)."""
    x = jnp.asarray(x)
    return jnp.square(jnp.real(x)) + jnp.square(jnp.imag(x)) if jnp.iscomplexobj(x) else \
        jnp.square(x)


# --- reductions and norms ------------------------------------------------------------------------


def _fold(op, values, initial):
    return functools.reduce(op, values, initial)


def tree_sum(tree, associative_reduction: bool = False):
    """The sum of every element of every leaf, a 0-d array (0 for an empty tree), as
    optax.tree_utils.tree_sum. associative_reduction sums the leaf totals as a balanced tree."""
    sums = [jnp.sum(jnp.asarray(x)) for x in tree_leaves(tree)]
    if associative_reduction:
        while len(sums) > 1:
            pairs = [sums[i] + sums[i + 1] for i in range(0, len(sums) - 1, 2)]
            sums = pairs + (sums[-1:] if len(sums) % 2 else [])
    return jnp.asarray(_fold(lambda a, b: a + b, sums, 0))


def tree_max(tree):
    """The largest element over all leaves (-inf for a tree without elements), as
    optax.tree_utils.tree_max."""
    maxes = [jnp.max(jnp.asarray(x)) for x in tree_leaves(tree) if np.size(x) > 0]
    return jnp.asarray(_fold(jnp.maximum, maxes, -np.inf))


def tree_min(tree):
    """The smallest element over all leaves (inf for a tree without elements), as
    optax.tree_utils.tree_min."""
    mins = [jnp.min(jnp.asarray(x)) for x in tree_leaves(tree) if np.size(x) > 0]
    return jnp.asarray(_fold(jnp.minimum, mins, np.inf))


def tree_size(tree) -> int:
    """The total number of elements of the leaves, a Python int (optax.tree_utils.tree_size)."""
    return int(sum(np.size(x) for x in tree_leaves(tree)))


def tree_norm(tree, ord=None, squared: bool = False):
    """The vector norm of all leaves together, a 0-d array (optax.tree_utils.tree_norm).

    Args:
      tree: a pytree of arrays.
      ord: None or 2 (the L2 norm), 1 (the sum of |x|), or inf / "inf" / "infinity" (max |x|).
      squared: return the norm squared.

    Raises:
      ValueError: another ord.
    """
    if ord is None or (not isinstance(ord, str) and ord == 2):
        sq = tree_sum(tree_map(_abs_square, tree))
        return jnp.asarray(sq if squared else jnp.sqrt(sq))
    if not isinstance(ord, str) and ord == 1:
        out = tree_sum(tree_map(lambda x: jnp.abs(jnp.asarray(x)), tree))
    elif ord in ("inf", "infinity") or (not isinstance(ord, str) and ord == np.inf):
        out = tree_max(tree_map(lambda x: jnp.abs(jnp.asarray(x)), tree))
    else:
        raise ValueError(f"tree_norm: ord must be None, 1, 2 or inf, got {ord!r}")
    return jnp.asarray(jnp.square(out) if squared else out)


def tree_l2_norm(tree, squared: bool = False):
    """tree_norm(tree, 2, squared), optax's older tree_l2_norm."""
    return tree_norm(tree, 2, squared)


def tree_l1_norm(tree, squared: bool = False):
    """tree_norm(tree, 1, squared), optax's older tree_l1_norm: the sum of |x|."""
    return tree_norm(tree, 1, squared)


def tree_linf_norm(tree, squared: bool = False):
    """tree_norm(tree, "inf", squared), optax's older tree_linf_norm: max |x|."""
    return tree_norm(tree, "inf", squared)


# --- constructors and casts ----------------------------------------------------------------------


def tree_zeros_like(tree, dtype=None):
    """Zeros shaped like every leaf, in `dtype` or each leaf's (optax.tree_utils.tree_zeros_like)."""
    return tree_map(lambda x: jnp.zeros_like(jnp.asarray(x), dtype=dtype), tree)


def tree_ones_like(tree, dtype=None):
    """Ones shaped like every leaf, in `dtype` or each leaf's (optax.tree_utils.tree_ones_like)."""
    return tree_map(lambda x: jnp.ones_like(jnp.asarray(x), dtype=dtype), tree)


def tree_full_like(tree, fill_value, dtype=None):
    """`fill_value` shaped like every leaf, in `dtype` or each leaf's
    (optax.tree_utils.tree_full_like)."""
    return tree_map(lambda x: jnp.full_like(jnp.asarray(x), fill_value, dtype=dtype), tree)


def tree_cast(tree, dtype):
    """Every leaf cast to `dtype`; the tree unchanged for dtype None (optax.tree_utils.tree_cast)."""
    return tree if dtype is None else tree_map(lambda x: jnp.asarray(x).astype(dtype), tree)


def tree_cast_like(tree, other_tree):
    """Each leaf of tree cast to the dtype of the matching leaf of other_tree (leaves without a
    dtype are kept), as optax.tree_utils.tree_cast_like."""
    return tree_map(lambda t, o: t.astype(o.dtype) if hasattr(o, "dtype") else t,
                    tree, other_tree)


def _dtype_of(x) -> np.dtype:
    return np.dtype(jnp.asarray(x).dtype)


def _ordered(a: np.dtype, b: np.dtype, want_high: bool) -> np.dtype:
    top = np.dtype(jnp.promote_types(a, b))
    if top not in (a, b):
        raise ValueError(f"tree_dtype: neither of {a} and {b} promotes to the other")
    low = b if top == a else a
    return top if want_high else low


def tree_dtype(tree, mixed_dtype_handler: str | None = None) -> np.dtype:
    """The dtype of the leaves (optax.tree_utils.tree_dtype); float32 for an empty tree.

    mixed_dtype_handler: None (all leaves must share one dtype), "promote" (their promoted
    dtype), "highest" / "lowest" (the highest / lowest under promotion).

    Raises:
      ValueError: mixed dtypes with handler None (naming the leaf and both dtypes); "highest" or
        "lowest" with two dtypes neither of which promotes to the other; another handler.
    """
    leaves = tree_leaves(tree)
    if mixed_dtype_handler not in (None, "promote", "highest", "lowest"):
        raise ValueError("tree_dtype: mixed_dtype_handler must be None, 'promote', 'highest' or "
                         f"'lowest', got {mixed_dtype_handler!r}")
    if not leaves:
        return np.dtype(np.float32)
    dts = [_dtype_of(x) for x in leaves]
    if mixed_dtype_handler is None:
        for i, dt in enumerate(dts):
            if dt != dts[0]:
                raise ValueError(f"tree_dtype: leaf {i} has dtype {dt} but leaf 0 has {dts[0]}")
        return dts[0]
    if mixed_dtype_handler == "promote":
        return functools.reduce(lambda a, b: np.dtype(jnp.promote_types(a, b)), dts)
    high = mixed_dtype_handler == "highest"
    return functools.reduce(lambda a, b: _ordered(a, b, high), dts)


# --- looking up values by key --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NamedTupleKey:
    """A path entry for field `name` of a NamedTuple of type `tuple_name`
    (optax.tree_utils.NamedTupleKey), as seen by tree_get's and tree_set's `filtering`."""

    tuple_name: str
    name: str

    def __str__(self):
        return f"{self.tuple_name}.{self.name}"


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _children(node):
    """[(key entry, name to match or None, child)] of a dict, NamedTuple, tuple or list; None
    for anything else (leaves and other registered nodes are not searched inside)."""
    if isinstance(node, dict):
        return [(DictKey(k), k, v) for k, v in node.items()]
    if _is_namedtuple(node):
        name = type(node).__name__
        return [(NamedTupleKey(name, f), f, v) for f, v in zip(node._fields, node, strict=True)]
    if isinstance(node, tuple | list):
        return [(SequenceKey(i), None, v) for i, v in enumerate(node)]
    return None


def tree_get_all_with_path(tree, key, filtering: Callable | None = None) -> list:
    """Every (path, value) in tree whose dict key or NamedTuple field is `key`, and every
    NamedTuple whose type is named `key` (optax.tree_utils.tree_get_all_with_path). A path is a
    tuple of DictKey / SequenceKey / NamedTupleKey; filtering(path, value) -> bool keeps some."""
    found: list = []

    def walk(path, node):
        if _is_namedtuple(node) and type(node).__name__ == key:
            found.append((path, node))
        for entry, name, child in _children(node) or []:
            if name is not None and name == key:
                found.append(((*path, entry), child))
            walk((*path, entry), child)

    walk((), tree)
    return [(p, v) for p, v in found if filtering is None or filtering(p, v)]


def _path_str(path) -> str:
    return "".join(f".{e}" if isinstance(e, NamedTupleKey) else str(e) for e in path) or "root"


def tree_get(tree, key, default=None, filtering: Callable | None = None):
    """The one value of tree under `key` (a dict key, NamedTuple field or NamedTuple type name),
    or `default` when there is none (optax.tree_utils.tree_get), e.g.
    tree_get(opt_state, "count").

    Raises:
      KeyError: several values match `key` (after filtering).
    """
    found = tree_get_all_with_path(tree, key, filtering)
    if len(found) > 1:
        paths = ", ".join(_path_str(p) for p, _ in found)
        raise KeyError(f"tree_get: found {len(found)} values for {key!r}: at {paths}")
    return found[0][1] if found else default


def tree_set(tree, filtering: Callable | None = None, /, **kwargs):
    """A copy of tree with the values under each key of kwargs (dict keys, NamedTuple fields, or
    whole NamedTuples named by their type) replaced by kwargs[key] (optax.tree_utils.tree_set),
    e.g. tree_set(opt_state, learning_rate=0.1). filtering(path, value) -> bool restricts it.

    Raises:
      KeyError: a key of kwargs matches nothing in tree (after filtering).
    """
    for k in kwargs:
        if not tree_get_all_with_path(tree, k, filtering):
            raise KeyError(f"tree_set: found no value for {k!r} in the tree")

    def keep(path, value):
        return filtering is None or filtering(path, value)

    def rebuild(path, node):
        if _is_namedtuple(node) and type(node).__name__ in kwargs and keep(path, node):
            return kwargs[type(node).__name__]
        kids = _children(node)
        if kids is None:
            return node
        new = [kwargs[name] if name in kwargs and keep((*path, e), c) else rebuild((*path, e), c)
               for e, name, c in kids]
        if isinstance(node, dict):
            return type(node)(zip(node.keys(), new, strict=True))
        return type(node)(*new) if _is_namedtuple(node) else type(node)(new)

    return rebuild((), tree)


# --- mapping over the parameter-shaped parts of a state ------------------------------------------


class _ParamsPlaceholder:
    """A pytree node without children: what init builds a state from in tree_map_params, so the
    parts of the state shaped like the params come out as placeholders."""


register_pytree_node(_ParamsPlaceholder, lambda p: ((), None),
                     lambda aux, kids: _ParamsPlaceholder())


def tree_map_params(initable, f: Callable, state, /, *rest, transform_non_params=None,
                    is_leaf=None):
    """Applies f over every params-shaped subtree of an optimizer state
    (optax.tree_map_params): f(leaf, *rest_leaves) for each leaf of such a subtree, where each
    tree of `rest` has the params' structure; transform_non_params(leaf) (when given) replaces
    every other leaf of the state.

    Args:
      initable: a GradientTransformation (anything with .init) or an init function; it is called
        on a placeholder to find which parts of the state are shaped like the params.
      f: the function mapped over the params-shaped subtrees.
      state: the optimizer state.
      is_leaf: passed to the inner tree_map.

    Raises:
      TypeError: initable is neither callable nor has an init.
      ValueError: state's structure differs from the one init builds.
    """
    init = getattr(initable, "init", initable)
    if not callable(init):
        raise TypeError("tree_map_params: initable must be a GradientTransformation or an init "
                        f"function, got {type(initable).__name__}")
    template = init(_ParamsPlaceholder())

    def walk(tpl, st):
        if isinstance(tpl, _ParamsPlaceholder):
            return tree_map(f, st, *rest, is_leaf=is_leaf)
        kids, td = tree_flatten(tpl, is_leaf=lambda y: y is not tpl)
        if td.kind == "leaf" or td.kind == "none":
            return st if transform_non_params is None or st is None else transform_non_params(st)
        st_kids, st_td = tree_flatten(st, is_leaf=lambda y: y is not st)
        if st_td != td:
            raise ValueError(f"tree_map_params: the state has structure {st_td} where init "
                             f"builds {td}")
        return tree_unflatten(td, [walk(a, b) for a, b in zip(kids, st_kids, strict=True)])

    return walk(template, state)


__all__ = [
    "NamedTupleKey", "tree_add", "tree_add_scalar_mul", "tree_add_scale",
    "tree_cast", "tree_cast_like", "tree_clip", "tree_conj", "tree_div", "tree_dtype",
    "tree_full_like", "tree_get", "tree_get_all_with_path", "tree_l1_norm", "tree_l2_norm",
    "tree_linf_norm", "tree_map_params", "tree_max", "tree_min", "tree_mul", "tree_norm",
    "tree_ones_like", "tree_real", "tree_scalar_mul", "tree_scale", "tree_set", "tree_size",
    "tree_sub", "tree_sum", "tree_vdot", "tree_where", "tree_zeros_like",
]
