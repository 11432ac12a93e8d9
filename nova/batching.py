"""Vectorizing map: `vmap`, as `jax.vmap`.

`vmap(f)` traces f once on one example's abstract values (the mapped axis removed) into a
Program of its own, then replays that Program's equations on the whole batch: each equation with
a mapped input becomes its primitive's batching rule (`Primitive.batch`, nova/core/primitive.py:
elementwise and reduction rules come from the kind, the others are declared with the primitive),
each equation of unmapped inputs runs once as it is. Inside the Program the mapped axis is
always the first; `in_axes` and `out_axes` move it once on the way in and out. The replay binds
into whatever is current (eager ops, an outer jit's trace, a grad's concrete trace), so vmap
composes with the other transforms both ways: `grad(vmap(f))` differentiates the batched
equations; `vmap(grad(f))` batches the backward grad appended to f's trace (per-example
gradients). Values f reads from an enclosing transform are captured as unmapped inputs
(core/trace.py `Trace.captures`). custom_vjp and custom_jvp calls keep their rules: the batched
call's rule is the vmap of the user's rule. A custom_vmap call with a mapped argument is its
rule (nova/custom_batching.py).

As under jax.vmap, values that depend on no mapped argument (constants, unmapped arguments,
values of an enclosing eager transform, and what is computed from those only) stay concrete
while f is traced (`Trace.known_values`), so Python code may read them; Python control flow on
a mapped value raises TracerBoolConversionError. (JAX's BatchTracer interprets f op by op instead; one trace and a
replay is the same result in Nova's single-trace design.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nova.collectives import _FRAMES, _REPLAYING, COLLECTIVES, AxisFrame, own_rule
from nova.core.ir import TensorType
from nova.core.primitive import broadcast_batched
from nova.core.pytree import tree_flatten, tree_leaves, tree_unflatten
from nova.core.source_info import attributed_to
from nova.core.trace import (
    CUSTOM_CALLS,
    CUSTOM_VMAP_CALL,
    Trace,
    current_trace,
    end_trace,
    trace_context,
)
from nova.custom_batching import replay_step
from nova.grad import _arg_names, _array_or_scalar, _where
from nova.ops import lax

__all__ = ["vmap"]


def _children(tree) -> tuple[list, object]:
    """The immediate children of a pytree node and the node's one-level structure."""
    return tree_flatten(tree, is_leaf=lambda x: x is not tree)


def _axes_of(spec, tree, what: str) -> list:
    """One axis (int or None) per leaf of `tree`, from `spec`: an int or None for every leaf
    below it, or a container of tree's own structure holding such specs (a pytree prefix, as
    jax.vmap's in_axes and out_axes). Raises ValueError when spec's structure is no prefix of
    tree's."""
    if spec is None or isinstance(spec, int | np.integer) and not isinstance(spec, bool):
        return [None if spec is None else int(spec)] * len(tree_leaves(tree))
    spec_kids, spec_td = _children(spec)
    if len(spec_kids) == 1 and spec_kids[0] is spec:  # a leaf that is no int or None
        raise TypeError(f"vmap {what}: expected an int, None, or a container of them, got "
                        f"{type(spec).__name__} {spec!r}{_where()}")
    tree_kids, tree_td = _children(tree)
    if spec_td != tree_td or spec is tree:
        raise ValueError(f"vmap {what}: the specification {spec!r} is not a prefix of the "
                         f"structure {tree_flatten(tree)[1]}: give an int, None, or a container "
                         f"of the same structure{_where()}")
    out = []
    for s, t in zip(spec_kids, tree_kids, strict=True):
        out += _axes_of(s, t, what)
    return out


def _normalized_axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"vmap {what}: axis {axis} is out of range for a value of rank {ndim}"
                         f"{_where()}")
    return axis % ndim


def _move_axis(x, src: int, dst: int):
    if src == dst:
        return x
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return lax.transpose(x, tuple(perm))


def _as_array(x, name: str):
    return _array_or_scalar(x, lambda: (
        f"vmap: argument {name} holds a {type(x).__name__}, which is not an array; map only "
        f"arrays (in_axes=None leaves other values as they are){_where()}"))


def vmap(fun: Callable, in_axes=0, out_axes=0, axis_size: int | None = None,
         axis_name=None, spmd_axis_name=None) -> Callable:
    """Maps `fun` over an axis of its arguments: `vmap(f)(xs)[i] == f(xs[i])`, as `jax.vmap`.

    in_axes: the mapped axis of each positional argument: an int (negative counts from the
    end), None (not mapped: every example sees the whole value), or a tuple/list with one entry
    per positional argument, each an int, None, or a pytree prefix of that argument giving an
    axis per leaf. Keyword arguments are mapped along axis 0. out_axes: where the mapped axis
    goes in each output (an int, or a pytree prefix of the output; None: the output must not
    depend on the mapped arguments, and is returned once). axis_size: the batch size, needed
    only when no argument is mapped. axis_name: a hashable name (usually a str) that binds the
    mapped axis for the collectives inside fun (`nova.lax.psum`, `pmean`, `all_gather`,
    `axis_index`, ...; nova/collectives.py). spmd_axis_name is accepted for JAX's signature
    and ignored (Nova has one device).

    Shapes: a mapped leaf of shape (..., B, ...) (B at its axis) is seen by fun as the shape
    without that axis; fun's outputs of shape S come back as S with B inserted at out_axes.
    dtypes are unchanged. Composes with grad, jvp, vjp, jit and vmap itself in any order.

    Raises ValueError when mapped axes have different sizes, an axis is out of range, in_axes
    or out_axes do not match the arguments' or outputs' structure, nothing is mapped and no
    axis_size is given, or an output given out_axes=None depends on a mapped value; TypeError
    for a mapped leaf that is not an array. Errors from fun itself (shape errors, Python control
    flow on traced values) name its source line, as under jit.
    """
    if not callable(fun):
        raise TypeError(f"vmap: expected a function, got {type(fun).__name__}")
    if axis_size is not None and (not isinstance(axis_size, int | np.integer)
                                  or isinstance(axis_size, bool) or axis_size < 0):
        raise ValueError(f"vmap: axis_size must be a non-negative int, got {axis_size!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    fname = getattr(fun, "__name__", "f")

    def batched(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap({fname}): in_axes has {len(in_axes)} entries but "
                             f"{len(args)} positional arguments were given{_where()}")
        specs = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        names = _arg_names(fun, len(args))
        leaves, axes, leaf_names = [], [], []
        for a, s, n in zip(args, specs, names, strict=True):
            lv = tree_leaves(a)
            leaves += lv
            axes += _axes_of(s, a, f"in_axes for argument '{n}'")
            leaf_names += [n if len(lv) == 1 else f"{n}[{i}]" for i in range(len(lv))]
        kw_leaves, kw_td = tree_flatten(kwargs)
        leaves += kw_leaves
        axes += [0] * len(kw_leaves)
        leaf_names += [f"keyword argument {i}" for i in range(len(kw_leaves))]
        arrays, size, sizes = [], axis_size, {}
        for x, ax, n in zip(leaves, axes, leaf_names, strict=True):
            if ax is None:
                arrays.append(x)
                continue
            x = _as_array(x, f"'{n}'")
            ax = _normalized_axis(ax, x.ndim, f"in_axes for '{n}'")
            sizes[n] = x.shape[ax]
            arrays.append(_move_axis(x, ax, 0))
        found = set(sizes.values()) | ({axis_size} if axis_size is not None else set())
        if len(found) > 1:
            listed = ", ".join(f"'{n}' {s}" for n, s in sizes.items())
            raise ValueError(f"vmap({fname}): the mapped axes have different sizes: {listed}"
                             f"{f' (axis_size {axis_size})' if axis_size is not None else ''}"
                             f"{_where()}")
        if not found:
            raise ValueError(f"vmap({fname}): no argument is mapped (every in_axes entry is "
                             f"None) and axis_size is not given{_where()}")
        size = found.pop()
        return _run(fun, args, kwargs, specs, axes, arrays, kw_td, size, out_axes, fname,
                    axis_name)

    batched.__name__ = f"vmap({fname})"
    batched.__wrapped__ = fun
    return batched


def _run(fun, args, kwargs, specs, axes, arrays, kw_td, size, out_axes, fname, axis_name=None):
    inner = Trace(concrete=False, kind="vmap")
    frame = AxisFrame(axis_name, size, inner)
    if axis_name is not None:
        _FRAMES.append(frame)
    try:
        program, inner, out, out_leaves, out_tree = _trace(fun, inner, args, kwargs, axes,
                                                           arrays, kw_td)
    finally:
        if axis_name is not None:
            _FRAMES.remove(frame)
    out_specs = _axes_of(out_axes, out, "out_axes") if out_leaves else []
    # The Program's inputs: one per mapped leaf (first), the captured outer values (unmapped)
    # and axis_index's input, whose batch is iota.
    env = {}
    captured = {id(v): outer for outer, v in inner.captures}
    mapped = iter(x for x, ax in zip(arrays, axes, strict=True) if ax is not None)
    for v in program.inputs:
        if id(v) in captured:
            env[id(v)] = (captured[id(v)], False)
        elif id(v) in frame.index_vars:
            env[id(v)] = (lax.iota(np.int32, size), True)
        else:
            env[id(v)] = (next(mapped), True)
    _REPLAYING.append(axis_name)
    try:
        _replay(program, env, size)
    finally:
        _REPLAYING.pop()
    return _outputs(program, env, out_specs, out_tree, size, fname)


def _trace(fun, inner, args, kwargs, axes, arrays, kw_td):
    """Traces fun on one example (the mapped axes removed) into a Program of its own."""
    with trace_context(inner):
        leaves = []
        for x, ax in zip(arrays, axes, strict=True):
            if ax is None:
                leaves.append(x)  # an unmapped value: a constant or a captured outer value
            else:
                leaves.append(inner.new_input(TensorType(x.shape[1:], x.dtype)))
        k = 0
        new_args = []
        for a in args:
            n = len(tree_leaves(a))
            new_args.append(tree_unflatten(tree_flatten(a)[1], leaves[k:k + n]))
            k += n
        new_kwargs = tree_unflatten(kw_td, leaves[k:])
        out = fun(*new_args, **new_kwargs)
        out_leaves, out_tree = tree_flatten(out)
        out_tr = [inner.lift(o) for o in out_leaves]
        program = inner.to_program(out_tr, keep_custom_rules=True)
    end_trace(inner)
    return program, inner, out, out_leaves, out_tree


def _outputs(program, env, out_specs, out_tree, size, fname):
    """fun's results: each Program output's value with its batch axis moved to out_axes."""
    results = []
    for v, ax in zip(program.outputs, out_specs, strict=True):
        val, is_mapped = env[id(v)]
        if ax is None:
            if is_mapped:
                raise ValueError(f"vmap({fname}): an output given out_axes=None depends on a "
                                 f"mapped argument (shape {tuple(val.shape[1:])}){_where()}")
            results.append(val)
            continue
        if not is_mapped:
            (val,) = broadcast_batched([val], [False], size)
        ax = _normalized_axis(ax, val.ndim, "out_axes")
        results.append(_move_axis(val, 0, ax))
    return tree_unflatten(out_tree, results)


def _replay(program, env: dict, size: int) -> None:
    """Binds `program`'s equations in the current context, mapped where an input is:
    env maps id(var) -> (value, mapped along its first axis). A collective over the axis of
    the vmap replaying now (`_REPLAYING`'s last; control-flow rules replay their bodies inside
    it) becomes ops over the batch axis."""
    own = _REPLAYING[-1]
    calls: list = []  # custom_vmap calls being replaced by their rules (nova/custom_batching.py)
    for e in program.eqns:
        if (calls or e.prim.name == CUSTOM_VMAP_CALL) and replay_step(e, env, size, calls):
            continue
        ins = [env[id(v)] for v in e.inputs]
        vals = [v for v, _ in ins]
        flags = [m for _, m in ins]
        with attributed_to(e.source):
            if own is not None and e.prim.name in COLLECTIVES and e.params["axis_name"] == own:
                outs, mapped = own_rule(e, vals[0], flags[0], size)
            elif e.prim.name in CUSTOM_CALLS:
                outs, mapped = _custom_call(e, vals, flags, size, own)
            elif not any(flags):
                outs = e.prim.bind(*vals, **e.params)
                mapped = False
            else:
                outs = e.prim.batch(vals, flags, **e.params)
                mapped = True
        outs = list(outs) if e.prim.multiple_results else [outs]
        marks = mapped if isinstance(mapped, list) else [mapped] * len(outs)
        for v, o, m in zip(e.outputs, outs, marks, strict=True):
            env[id(v)] = (o, m)


def _custom_call(e, vals, flags, size, axis_name=None):
    """A custom_vjp / custom_jvp marker: unmapped, recorded as it was; mapped, its arguments,
    outputs and residuals all mapped and its rule replaced by the rule's vmap (over
    axis_name, the replaying vmap's). Outside any trace the marker is only its primal outputs,
    each mapped as it is. Returns (outputs, their mapped flags: a list, or one bool for all)."""
    n_args, n_out, n_res = e.params["n_args"], e.params["n_out"], e.params["n_res"]
    if current_trace() is None:
        return tuple(vals[n_args:n_args + n_out]), list(flags[n_args:n_args + n_out])
    if not any(flags):
        return e.prim.bind(*vals, **e.params), False
    from nova.custom_derivatives import batched_rule

    n = n_args + n_out + n_res
    main = broadcast_batched(vals[:n], flags[:n], size)
    params = dict(e.params, rule=batched_rule(e.params["rule"], size, axis_name))
    return e.prim.bind(*main, *vals[n:], **params), True
