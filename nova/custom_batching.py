"""Functions with batching rules of their own: `custom_vmap` and `sequential_vmap`, as
jax.custom_batching's.

A call of a custom_vmap function inside a trace records two marker equations (an unregistered
primitive, as custom_vjp's: nova/custom_derivatives.py) around the function's own equations: a
begin marker of the argument leaves, and an end marker of the argument leaves, the output leaves
the function computed and values it closed over, whose results are those outputs.
`Trace.to_program` removes both (core/trace.py), so a compiled Program holds the function's
equations and nothing else. When `nova.vmap` replays a Program (nova/batching.py `_replay`, hook
`replay_step`) and meets a begin marker with a mapped argument, it skips the function's
equations up to the matching end marker and calls the user's rule there on the whole batch; its
out_batched flags say which results are mapped (so a function that cannot be batched, or prints,
never runs batched). With no mapped argument both markers are recorded again as they are, for an
enclosing vmap to meet.

Derivatives, as in JAX: forward mode (`jvp`, `jacfwd`) differentiates the function outside vmap
and the rule inside it (the tangent map is itself a custom_vmap call whose rule is the jvp of
the user's rule); reverse mode (`grad`, `vjp`) raises ValueError: wrap the function in
`nova.custom_vjp` (outside the custom_vmap) to give it one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.core.ir import TensorType
from nova.core.primitive import (
    Cost,
    FusionKind,
    Primitive,
    Template,
    broadcast_batched,
    makes_effects,
)
from nova.core.pytree import tree_flatten, tree_leaves, tree_unflatten
from nova.core.source_info import attributed_to, user_frame_line
from nova.core.trace import CUSTOM_VMAP_CALL, current_trace, trace_context
from nova.custom_derivatives import _closed_over, _CustomFunction, _is_array_leaf
from nova.grad import _arg_names, _where
from nova.ops import lax

__all__ = ["custom_vmap", "sequential_vmap"]


class _VmapRule:
    """What the markers of one custom_vmap call need under vmap: `call(axis_size, flags,
    leaves) -> (output leaves, their out_batched flags)` on the flat argument leaves (mapped
    ones with the batch axis first), and the function's per-example output types, which
    every result of `call` is checked against."""

    kind, primal_fn = "custom_vmap", "function"  # (for grad.py's closure message)

    def __init__(self, name: str, call: Callable, out_types: list | None = None):
        self.name = name
        self.call = call
        self.out_types = out_types  # set when the function has run (the begin marker is first)

    def __repr__(self):
        return f"custom_vmap({self.name})"

    def batched(self, args: list, flags: list, closed: list, closed_flags: list, size: int):
        """The rule on the call's argument leaves `args` (mapped where `flags`): (outputs,
        their mapped flags). Raises ValueError when a value the function closed over is
        mapped (the rule would see it per example)."""
        for v, m in zip(closed, closed_flags, strict=True):
            if m:
                raise ValueError(
                    f"custom_vmap {self.name}: the function closes over a value mapped by this "
                    f"vmap (per-example shape {tuple(v.shape[1:])}, dtype {v.dtype}), which its "
                    f"vmap rule cannot see batched: pass it to the function as an argument"
                    f"{_where()}")
        outs, out_flags = self.call(size, list(flags), list(args))
        return self._checked(list(outs), list(out_flags), size), [bool(b) for b in out_flags]

    def _checked(self, outs: list, out_flags: list, size: int) -> tuple:
        """The rule's output leaves as arrays, each checked against the function's output of
        the same position: shape (size, *shape) where batched, else shape; same dtype."""
        import nova.numpy as jnp

        got = []
        for j, (o, b, t) in enumerate(zip(outs, out_flags, self.out_types, strict=True)):
            if not isinstance(b, bool | np.bool_):
                raise TypeError(f"custom_vmap {self.name}: the vmap rule's out_batched leaf {j} "
                                f"is a {type(b).__name__} ({b!r}); give a bool (True: that "
                                f"output has the batch axis first){_where()}")
            if isinstance(o, bool | int | float | complex):  # a Python scalar: the output's dtype
                o = jnp.asarray(o, dtype=t.dtype)
            elif not isinstance(o, Array):
                o = jnp.asarray(o)
            want = (size, *t.shape) if b else tuple(t.shape)
            if tuple(o.shape) != want:
                raise ShapeError(
                    f"custom_vmap {self.name}: the vmap rule's output leaf {j} has shape "
                    f"{tuple(o.shape)}, but the function's output there is {t} and its "
                    f"out_batched is {bool(b)}, so the rule must return shape {want}{_where()}")
            if o.dtype != t.dtype:
                raise TypeError(
                    f"custom_vmap {self.name}: the vmap rule's output leaf {j} has dtype "
                    f"{o.dtype}, but the function's output there has dtype {t.dtype}{_where()}")
            got.append(o)
        return tuple(got)


def replay_step(e, env: dict, size: int, calls: list) -> bool:
    """nova/batching.py `_replay`'s hook: handles equation e when it is a custom_vmap marker or
    lies inside a call whose rule replaces it (`calls`: the begin markers of those calls, None
    for a call nested in one); returns whether it did (else _replay batches e as usual).

    A call with a mapped argument is its rule: from its begin marker to its end marker the
    function's equations are skipped (those of mapped or skipped values, and effects; values
    of unmapped inputs only are computed as usual, since the trace shares such constants with
    later code), and the end marker's results are the rule's. A call with no mapped argument
    keeps its equations and is marked again in the current trace, for an enclosing vmap."""
    is_marker = e.prim is _custom_vmap_call_p
    if calls:
        if not is_marker:
            ins = [env.get(id(v)) for v in e.inputs]
            return any(x is None or x[1] for x in ins) or makes_effects(e.prim, e.params)
        if e.params["begin"]:
            calls.append(None)
            return True
        if calls.pop() is None:
            return True  # the end of a call nested in a skipped one
    elif not is_marker:
        return False
    p = e.params
    n_args, n_out = p["n_args"], p["n_out"]
    ins = [env.get(id(v)) for v in e.inputs]
    flags = [x[1] for x in ins[:n_args]]
    if p["begin"]:
        if any(flags):
            calls.append(e)
        elif current_trace() is not None:
            e.prim.bind(*[x[0] for x in ins], **p)
        return True
    closed = ins[n_args + n_out:]
    with attributed_to(e.source):
        if any(flags) or any(m for _, m in closed):
            outs, marks = p["rule"].batched([x[0] for x in ins[:n_args]], flags,
                                            [v for v, _ in closed], [m for _, m in closed], size)
        elif current_trace() is None:  # eager replay: the function's outputs, as computed
            outs, marks = [x[0] for x in ins[n_args:n_args + n_out]], [False] * n_out
        else:
            outs, marks = e.prim.bind(*[x[0] for x in ins], **p), [False] * n_out
    for v, o, m in zip(e.outputs, outs, marks, strict=True):
        env[id(v)] = (o, m)
    return True


def _unflatten_args(arg_trees: list, leaves: list) -> list:
    out, k = [], 0
    for td in arg_trees:
        out.append(tree_unflatten(td, leaves[k:k + td.num_leaves]))
        k += td.num_leaves
    return out


def _user_call(name: str, rule: Callable, arg_trees: list, out_tree) -> Callable:
    """The flat `call` of a _VmapRule from the user's rule(axis_size, in_batched, *args) ->
    (out, out_batched): in_batched is a list with one pytree of bools per argument, of that
    argument's structure; out must have the function's output structure and out_batched the
    same structure, with bool leaves."""

    def call(size: int, flags: list, leaves: list):
        args = _unflatten_args(arg_trees, leaves)
        got = rule(size, _unflatten_args(arg_trees, flags), *args)
        if not (isinstance(got, tuple | list) and len(got) == 2):
            raise TypeError(f"custom_vmap {name}: the vmap rule must return a pair (out, "
                            f"out_batched), got {type(got).__name__}{_where()}")
        out, out_batched = got
        out_leaves, td = tree_flatten(out)
        if td != out_tree:
            raise ValueError(f"custom_vmap {name}: the vmap rule's output has the structure "
                             f"{td}, but the function's output has {out_tree}{_where()}")
        flag_leaves, ftd = tree_flatten(out_batched)
        if ftd != td:
            raise ValueError(f"custom_vmap {name}: the vmap rule's out_batched has the "
                             f"structure {ftd}, but its output has {td}: give one bool per "
                             f"output leaf, in the output's structure{_where()}")
        return out_leaves, flag_leaves

    return call


# --- the marker primitive and its derivatives -------------------------------------------------


def _marker_shape(*in_types, rule, n_args, n_out, n_res, begin):
    return tuple(in_types[n_args:n_args + n_out])


def _marker_impl(*vals, rule, n_args, n_out, n_res, begin):
    return tuple(vals[n_args:n_args + n_out])


def _marker_vjp(ct, *primals, out, rule, n_args, n_out, n_res, begin):
    raise ValueError(
        f"custom_vmap {rule.name}: reverse-mode differentiation (grad, vjp, value_and_grad) "
        f"of a custom_vmap function is not supported, as in JAX: wrap it in nova.custom_vjp "
        f"(custom_vjp outside, custom_vmap inside) to give it a reverse-mode rule{_where()}")


def _marker_jvp(ts, *primals, out, rule, n_args, n_out, n_res, begin):
    """Forward mode at a custom_vmap call's markers: the tangents of the function's outputs
    (what forward mode computed from its equations, between the two tangent markers made
    here), marked as a custom_vmap call of their own whose rule is the jvp of `rule`, so that
    vmap of the jvp differentiates the user's rule."""
    trace = current_trace()
    args = [trace.lift(p) for p in primals[:n_args]] + [trace.lift(t) for t in ts[:n_args]]
    t_rule = _VmapRule(f"jvp({rule.name})", _jvp_call(rule, n_args))
    if begin:
        params = {"rule": t_rule, "n_args": 2 * n_args, "n_out": 0, "n_res": 0, "begin": True}
        return tuple(trace.add_eqn(_custom_vmap_call_p, args, params, user_frame_line()))
    t_outs = [trace.lift(t) for t in ts[n_args:n_args + n_out]]
    closed = [trace.lift(p) for p in primals[n_args + n_out:]]
    t_rule.out_types = [TensorType(t.shape, t.dtype) for t in t_outs]
    params = {"rule": t_rule, "n_args": 2 * n_args, "n_out": n_out, "n_res": 0, "begin": False}
    return tuple(trace.add_eqn(_custom_vmap_call_p, args + t_outs + closed, params,
                               user_frame_line()))


def _jvp_call(base: _VmapRule, n: int) -> Callable:
    """The flat `call` of the tangent map of a custom_vmap call with rule `base` and n
    argument leaves: leaves are (primals, tangents); a primal whose tangent is mapped (or the
    other way round) is broadcast, and the tangents out are `nova.jvp` of base's rule, mapped
    as its outputs are."""
    from nova.grad import jvp

    def call(size: int, flags: list, leaves: list):
        mapped = [a or t for a, t in zip(flags[:n], flags[n:], strict=True)]
        prim = [_mapped(x, b, m, size) for x, b, m in zip(leaves[:n], flags[:n], mapped,
                                                            strict=True)]
        tans = [_mapped(x, b, m, size) for x, b, m in zip(leaves[n:], flags[n:], mapped,
                                                            strict=True)]
        floats = [i for i in range(n) if dtypes.is_float(prim[i].dtype)]
        box = {}

        def primal_fn(*xs):
            full = list(prim)
            for i, x in zip(floats, xs, strict=True):
                full[i] = x
            outs, out_flags = base.call(size, mapped, full)
            box["flags"] = out_flags
            return list(base._checked(list(outs), list(out_flags), size))

        if floats:
            _, t_out = jvp(primal_fn, [prim[i] for i in floats], [tans[i] for i in floats])
        else:
            t_out = [None] * len(base.out_types)
            primal_fn()
        out = []
        for t, ty, b in zip(t_out, base.out_types, box["flags"], strict=True):
            shape = (size, *ty.shape) if b else tuple(ty.shape)
            if t is None or not dtypes.is_float(ty.dtype):
                t = lax.full(shape, 0, ty.dtype)
            out.append(t)
        return out, box["flags"]

    return call


def _mapped(x, is_mapped: bool, want: bool, size: int):
    """x broadcast along a new first axis of `size` when it is wanted mapped and is not."""
    return broadcast_batched([x], [False], size)[0] if want and not is_mapped else x


def _marker_cost(in_types, out_types, **params):
    return Cost(0, 0)


# The marker of a custom_vmap call, twice per call: `begin` (inputs: the argument leaves; no
# results) before the function's equations, and the end (inputs: the argument leaves, the
# function's output leaves, the values it closed over; results: the outputs) after them.
_custom_vmap_call_p = Primitive(
    CUSTOM_VMAP_CALL, shape_rule=_marker_shape, impl=_marker_impl, vjp=_marker_vjp,
    jvp=_marker_jvp, fusion=FusionKind.OPAQUE, kernel=Template(CUSTOM_VMAP_CALL),
    cost=_marker_cost, multiple_results=True, registered=False)


# --- user functions ---------------------------------------------------------------------------


class custom_vmap(_CustomFunction):
    """A function with a batching rule of its own, as `jax.custom_batching.custom_vmap`.

    ::

        @nova.custom_batching.custom_vmap
        def f(x, y): ...

        @f.def_vmap
        def f_vmap(axis_size, in_batched, xs, ys):
            # in_batched: [bools of x's structure, bools of y's structure]
            return out, out_batched            # out_batched: bools of out's structure

    Outside `nova.vmap`, `f` is `fun` (under jit, grad, jvp too). Under vmap, when at least one
    argument leaf is mapped, Nova calls the rule instead of batching fun's operations:
    `axis_size` is the vmap's batch size (the innermost vmap's, when nested: the rule's own
    operations are then batched by the outer vmaps as any others); `in_batched` is a list with
    one pytree of bools per positional argument, of that argument's structure (True: that leaf
    carries the batch axis first, shape (axis_size, *shape); False: it is the same for every
    example, of its per-example shape); the arguments come with the batch axis first
    whatever vmap's in_axes. The rule returns (out, out_batched): out of fun's output structure,
    each leaf of fun's per-example dtype, of shape (axis_size, *shape) where its out_batched
    leaf is True and of the per-example shape where False. With no mapped argument (in_axes
    None), fun's operations are used, as in JAX.

    Derivatives: forward mode (`nova.jvp`, `jacfwd`) differentiates fun outside vmap, and the
    rule inside it (vmap of jvp and jvp of vmap both), as JAX does. Reverse mode (`grad`, `vjp`,
    `value_and_grad`) through a call raises ValueError, as in JAX: combine with
    `nova.custom_vjp` (`custom_vjp(custom_vmap(fun))`, call `def_vmap` on the inner function)
    for a function with both rules. (Reverse mode over a vmap of it, grad(vmap(f)), works: it
    differentiates the rule's operations.)

    Arguments: positional or keyword (bound to fun's signature), pytrees of arrays or Python
    scalars. The rule must not read values computed inside the vmapped function other than its
    arguments (it runs after that function was traced: such a value raises
    UnexpectedTracerError).

    Raises AttributeError when called before `def_vmap`; TypeError for an argument leaf that is
    not an array, a rule that does not return a pair or returns a non-bool out_batched leaf or
    an output of another dtype; ValueError when the rule's out or out_batched structure differs
    from fun's output's, or fun closes over a value the vmap maps; ShapeError for a rule output
    whose shape does not match its out_batched flag.
    """

    kind = "custom_vmap"

    def __init__(self, fun: Callable):
        super().__init__(fun)
        self.vmap_rule: Callable | None = None

    def def_vmap(self, rule: Callable) -> Callable:
        """Sets the rule rule(axis_size, in_batched, *args) -> (out, out_batched); returns it
        (so it works as a decorator). Raises TypeError when rule is not callable."""
        if not callable(rule):
            raise TypeError(f"custom_vmap {self._name()}: def_vmap takes a function, got "
                            f"{type(rule).__name__}")
        self.vmap_rule = rule
        return rule

    def __call__(self, *args, **kwargs):
        name = self._name()
        if self.vmap_rule is None:
            raise AttributeError(f"no batching rule defined for the custom_vmap function "
                                 f"{name}: call {getattr(self.fun, '__name__', 'f')}.def_vmap"
                                 f"(rule) first")
        args = self._positional(args, kwargs)
        trace = current_trace()
        if trace is None:  # outside transforms
            return self.fun(*args)
        names = _arg_names(self.fun, len(args))
        arg_trees, flat, new_args = [], [], []
        with trace_context(trace):
            for a, n in zip(args, names, strict=True):
                leaves, td = tree_flatten(a)
                for x in leaves:
                    if not _is_array_leaf(x):
                        raise TypeError(f"custom_vmap {name}: argument '{n}' holds a "
                                        f"{type(x).__name__}, which is not an array; close "
                                        f"over static values instead of passing them{_where()}")
                lifted = [trace.lift(x) for x in leaves]
                arg_trees.append(td)
                flat += lifted
                new_args.append(tree_unflatten(td, lifted))
            start = len(trace.eqns)
            rule = _VmapRule(name, None)
            trace.add_eqn(_custom_vmap_call_p, flat, {"rule": rule, "n_args": len(flat),
                                                      "n_out": 0, "n_res": 0, "begin": True},
                          user_frame_line())
            out = self.fun(*new_args)
            out_leaves, out_tree = tree_flatten(out)
            out_tr = [trace.lift(o) for o in out_leaves]
        closed = _closed_over(trace, start, flat, out_tr)
        rule.call = _user_call(name, self.vmap_rule, arg_trees, out_tree)
        rule.out_types = [TensorType(t.shape, t.dtype) for t in out_tr]
        params = {"rule": rule, "n_args": len(flat), "n_out": len(out_tr), "n_res": 0,
                  "begin": False}
        outs = trace.add_eqn(_custom_vmap_call_p, flat + out_tr + closed, params,
                             user_frame_line())
        if not out_tr:
            return out
        return tree_unflatten(out_tree, outs)


def sequential_vmap(fun: Callable) -> custom_vmap:
    """`fun` as a custom_vmap function whose vmap is a loop over the batch (`nova.lax.map`),
    as `jax.custom_batching.sequential_vmap`: under `nova.vmap`, fun runs once per example on
    that example's slices of the mapped arguments (the unmapped ones whole), and every output
    is mapped (shape (axis_size, *shape)). Outside vmap it is fun. Nested vmaps nest the loops.
    Same results as the plain vmap of fun; for functions that have no batching of their own
    (callbacks) or whose batched form would take too much memory. Derivatives: as custom_vmap
    (forward mode yes, reverse mode raises ValueError)."""
    if not callable(fun):
        raise TypeError(f"sequential_vmap: expected a function, got {type(fun).__name__}")
    f = custom_vmap(fun)

    def rule(axis_size, in_batched, *args):
        from nova.control_flow import map as loop

        leaves, td = tree_flatten(list(args))
        flags = tree_leaves(in_batched)

        def one(xs):
            it = iter(xs)
            full = [next(it) if b else x for x, b in zip(leaves, flags, strict=True)]
            return f(*tree_unflatten(td, full))

        out = loop(one, [x for x, b in zip(leaves, flags, strict=True) if b])
        out_leaves, out_tree = tree_flatten(out)
        return out, tree_unflatten(out_tree, [True] * len(out_leaves))

    f.def_vmap(rule)
    return f

