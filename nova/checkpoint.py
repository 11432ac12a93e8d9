"""`nova.checkpoint` (alias `nova.remat`): gradient checkpointing, as jax.checkpoint.

Reverse mode normally keeps every intermediate value of the forward pass that the backward
reads. A checkpointed function keeps only its inputs: its backward first recomputes the
function's forward from them, then applies its VJP (Chen et al. 2016, "Training Deep Nets with
Sublinear Memory Cost"). Memory falls from every intermediate of the function to its inputs,
for one more forward evaluation of it.

How: the function is traced once into a closed Program (control_flow.trace_region: values it
reads from an enclosing trace become explicit inputs, so their cotangents flow too), and called
through a custom_vjp whose fwd saves the inputs and whose bwd re-runs the Program on them and
pulls the cotangents back. With prevent_cse (the default) the recomputation reads its inputs
through `lax.optimization_barrier`, so under jit common-subexpression elimination cannot merge
it back into the forward (the pass pipeline removes the barrier after its last cse).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from nova.core import dtypes
from nova.core.pytree import tree_flatten, tree_unflatten
from nova.core.trace import current_trace

_POLICIES = ("nothing_saveable", "everything_saveable")


class checkpoint_policies:
    """What a checkpointed function's forward may keep for its backward (jax.checkpoint_policies).
    Two are available: `nothing_saveable` (the default: keep only the inputs, recompute the
    rest) and `everything_saveable` (keep everything: no recomputation, as without checkpoint).
    Policies that keep some intermediates (dots_saveable, save_only_these_names...) are not
    implemented."""

    @staticmethod
    def nothing_saveable(*_args, **_kwargs) -> bool:
        return False

    @staticmethod
    def everything_saveable(*_args, **_kwargs) -> bool:
        return True


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy=None,
               static_argnums: int | tuple = ()) -> Callable:
    """fun, differentiated by recomputing its forward in the backward instead of keeping its
    intermediates (jax.checkpoint / jax.remat). Usable as a decorator, with or without
    arguments.

    fun's arguments are arrays, scalars or pytrees of them; those at `static_argnums` are static
    Python values (hashable), passed through untraced. prevent_cse: keep the recomputation
    apart from the forward under jit (turn off only inside a scan body, where nothing can be
    merged). policy: None or checkpoint_policies.nothing_saveable (keep the inputs only), or
    checkpoint_policies.everything_saveable (keep everything: fun itself). Outside any
    transform the result is fun's. Raises TypeError for an unknown policy or a traced static
    argument, ValueError for a static_argnums entry outside [-len(args), len(args)), and what
    fun raises.
    """
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums)
    if not callable(fun):
        raise TypeError(f"checkpoint: fun must be callable, got {type(fun).__name__}")
    if policy is not None and policy not in (checkpoint_policies.nothing_saveable,
                                             checkpoint_policies.everything_saveable):
        raise TypeError(f"checkpoint: policy {getattr(policy, '__name__', policy)!r} is not "
                        f"available; Nova has {', '.join(_POLICIES)}")
    statics = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if policy is checkpoint_policies.everything_saveable:
        return fun

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        n = len(args)
        bad = [i for i in statics if not -n <= i < n]
        if bad:
            raise ValueError(f"checkpoint: static_argnums {statics} must lie in [-{n}, {n}) "
                             f"for a call with {n} positional argument(s); {bad[0]} does not")
        if current_trace() is None:  # no transform: nothing is kept either way
            return fun(*args, **kwargs)
        static = {i % n for i in statics}
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, tree = tree_flatten((dyn, kwargs))
        return _checkpointed(fun, args, static, leaves, tree, prevent_cse)

    return wrapped


remat = checkpoint


def _checkpointed(fun, args, static, leaves, tree, prevent_cse):
    from nova.control_flow import _asarray, _aval, _region, inline, trace_region
    from nova.core.trace import Tracer
    from nova.custom_derivatives import custom_vjp
    from nova.grad import vjp
    from nova.ops.structural import optimization_barrier

    for i in static:
        if any(isinstance(x, Tracer) for x in tree_flatten(args[i])[0]):
            raise TypeError(f"checkpoint: argument {i} is in static_argnums but holds a traced "
                            "array; pass it as a traced argument instead")
    arrays = [_asarray(x, "a checkpointed function's argument") for x in leaves]

    def flat_fun(*vals):
        dyn, kwargs = tree_unflatten(tree, list(vals))
        it = iter(dyn)
        full = [args[i] if i in static else next(it) for i in range(len(args))]
        return fun(*full, **kwargs)

    program, consts, out_tree = trace_region(flat_fun, [_aval(a) for a in arrays])
    region = _region(program)
    inputs = arrays + list(consts)

    def run(*xs):
        return tuple(inline(region, list(xs)))

    def fwd(*xs):
        return run(*xs), xs

    floats = [k for k, a in enumerate(inputs) if dtypes.is_float(a.dtype)]

    def bwd(xs, cts):
        ins = optimization_barrier(list(xs)) if prevent_cse else list(xs)

        def of_floats(*fs):  # integer inputs have no cotangent (custom_vjp takes None)
            full = list(ins)
            for k, f in zip(floats, fs, strict=True):
                full[k] = f
            return run(*full)

        out = [None] * len(ins)
        if floats:
            _, pull = vjp(of_floats, *[ins[k] for k in floats])
            for k, g in zip(floats, pull(tuple(cts)), strict=True):
                out[k] = g
        return tuple(out)

    call = custom_vjp(run)
    call.defvjp(fwd, bwd)
    return tree_unflatten(out_tree, list(call(*inputs)))
