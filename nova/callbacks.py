"""Calling Python from traced code: `pure_callback` and `io_callback` (jax.pure_callback,
jax.experimental.io_callback); `nova.debug.callback` and `nova.debug.print` build on
io_callback. The primitives and their rules are nova/ops/callback.py."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nova.core import dtypes
from nova.core.ir import TensorType
from nova.core.pytree import tree_flatten, tree_unflatten
from nova.core.source_info import short, user_frame_line
from nova.numpy_impl.util import asarray
from nova.ops.callback import HostCallback, io_callback_p, pure_callback_p

_VMAP_METHODS = (None, "sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized")


def _result_types(name: str, result_shape_dtypes) -> tuple[list, object]:
    """(TensorTypes of the declared results, their tree). Raises TypeError for a leaf without
    shape and dtype or with a dtype Nova does not support."""
    leaves, tree = tree_flatten(result_shape_dtypes)
    types = []
    for i, r in enumerate(leaves):
        if not (hasattr(r, "shape") and hasattr(r, "dtype")):
            raise TypeError(f"{name}: result_shape_dtypes leaf {i} is a {type(r).__name__}; "
                            "expected an object with .shape and .dtype (nova.ShapeDtypeStruct, "
                            "an array)")
        types.append(TensorType(tuple(r.shape), dtypes.canonicalize(
            r.dtype, arg_name=f"{name}: result_shape_dtypes leaf {i}'s dtype")))
    return types, tree


def _host_function(name: str, callback: Callable, in_tree, kwargs_given: bool) -> HostCallback:
    """The callback called with NumPy arrays in the structure of the call's (args, kwargs)."""
    if not callable(callback):
        raise TypeError(f"{name}: callback must be callable, got {type(callback).__name__}")
    where = short(user_frame_line())

    def call(*leaves):
        args, kwargs = tree_unflatten(in_tree, list(leaves))
        return callback(*args, **kwargs) if kwargs_given else callback(*args)

    label = getattr(callback, "__qualname__", type(callback).__name__)
    return HostCallback(call, f"{label} at {where}")


def _operands(name: str, args, kwargs) -> tuple[list, object]:
    leaves, in_tree = tree_flatten((list(args), dict(kwargs)))
    ops = []
    for i, x in enumerate(leaves):
        try:
            ops.append(asarray(x))
        except TypeError as e:
            raise TypeError(f"{name}: argument leaf {i} ({type(x).__name__}) is not an array "
                            f"or a scalar: {e}") from None
    return ops, in_tree


def pure_callback(callback: Callable, result_shape_dtypes, *args, sharding=None,
                  vmap_method: str | None = None, **kwargs):
    """Calls the Python function `callback(*args, **kwargs)` on the host with NumPy arrays,
    from eager code or inside `jit`, `grad`'s forward, `vmap` (jax.pure_callback).

    callback must be pure (a function of its arguments only): its call may be dropped when its
    results are unused, merged with an equal call, or repeated. result_shape_dtypes: a pytree
    of objects with `.shape` and `.dtype` (nova.ShapeDtypeStruct, arrays) declaring what it
    returns; the results come back in that structure, cast to the declared dtypes.
    vmap_method: how `nova.vmap` calls it: 'sequential' (once per batch element),
    'expand_dims' (once, unbatched arguments with a leading axis of 1), 'broadcast_all' (once,
    every argument broadcast to the batch), 'legacy_vectorized' (once, arguments as they are);
    None: vmap raises NotImplementedError. sharding is accepted and ignored (one device).
    Raises TypeError for a non-callable callback, bad result_shape_dtypes, results whose
    number or dtype kind differs from the declaration, or a derivative through the call;
    ValueError for a result of another shape or an unknown vmap_method.
    """
    del sharding
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method {vmap_method!r} is not one of "
                         f"{[m for m in _VMAP_METHODS if m]} or None")
    types, out_tree = _result_types("pure_callback", result_shape_dtypes)
    ops, in_tree = _operands("pure_callback", args, kwargs)
    fn = _host_function("pure_callback", callback, in_tree, bool(kwargs))
    if not types:  # nothing to return: a pure call without results does nothing
        return tree_unflatten(out_tree, [])
    outs = pure_callback_p.bind(*ops, callback=fn, result_types=tuple(types),
                                vmap_method=vmap_method)
    return tree_unflatten(out_tree, list(outs))


def io_callback(callback: Callable, result_shape_dtypes, *args, sharding=None,
                ordered: bool = False, **kwargs):
    """Calls the Python function `callback(*args, **kwargs)` on the host for its effect
    (printing, logging, writing a file), with NumPy arrays (jax.experimental.io_callback).

    Unlike pure_callback, the call is never dropped, merged or reordered by the compiler:
    each call traced runs once per execution, in program order (so `ordered` is accepted and
    always holds). result_shape_dtypes: None for no results, or a pytree of objects with
    `.shape` and `.dtype`. Under `nova.vmap` the callback is called once per batch element;
    inside lax.scan / while_loop bodies once per iteration; derivatives do not repeat it
    (a nova.checkpoint function's recomputation does). Raises as pure_callback.
    """
    del sharding, ordered
    types, out_tree = _result_types("io_callback", result_shape_dtypes) \
        if result_shape_dtypes is not None else ([], None)
    ops, in_tree = _operands("io_callback", args, kwargs)
    fn = _host_function("io_callback", callback, in_tree, bool(kwargs))
    from nova.ops import lax

    outs = io_callback_p.bind(lax.full((), 0, np.int32), *ops, callback=fn,
                              result_types=tuple(types))
    return None if out_tree is None else tree_unflatten(out_tree, list(outs[1:]))
