"""Functions with derivative rules of their own: `custom_vjp` and `custom_jvp`, as JAX's.

Both record a marker equation in the current trace (an unregistered primitive that lives only in
traces: core/trace.py removes it in `Trace.to_program`, so the compiler never sees one). The
marker's inputs are the call's argument leaves, then the primal output leaves already computed,
then (custom_vjp) the residuals, then values the rule closed over; its results are the primal
outputs. Reverse mode (grad.py `_backward_walk`) and forward mode (`forward_pass`) meet the
marker and call its rule instead of differentiating what produced the outputs.

- custom_vjp: fwd computes the output and residuals; the marker's VJP calls bwd. Forward mode
  transposes bwd (grad.py `_jvp_via_vjp`).
- custom_jvp: fun computes the output; the marker's JVP calls the user's jvp rule. Its VJP
  traces the jvp rule with fresh tangent variables and runs reverse mode over the tangent
  equations alone: they are linear in the tangents, so their VJP is the transpose of the rule
  (what JAX gets by linearize + transpose).
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Sequence

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.ir import TensorType
from nova.core.pytree import tree_flatten, tree_leaves, tree_unflatten
from nova.core.source_info import user_frame_line
from nova.core.trace import (
    CUSTOM_JVP_CALL,
    CUSTOM_VJP_CALL,
    Trace,
    Tracer,
    current_trace,
    trace_context,
)
from nova.grad import _arg_names, _as_array_like, _where, _zeros_like, backward_pass
from nova.ops import lax


class _CustomVJPRule:
    """What the marker of one custom_vjp call needs to apply its bwd: the rule, the static
    (nondiff) arguments, and the structures of the differentiated arguments, the primal output
    and the residuals (static residual leaves by position)."""

    def __init__(self, name, bwd, nondiff, arg_trees, out_tree, res_tree, res_static, arg_types):
        self.name = name
        self.bwd = bwd
        self.nondiff = nondiff
        self.arg_trees = arg_trees  # one treedef per differentiated positional argument
        self.out_tree = out_tree
        self.res_tree = res_tree
        self.res_static = res_static  # {leaf position: a residual leaf that is no array}
        self.arg_types = arg_types  # TensorType of each differentiated argument leaf

    kind, primal_fn = "custom_vjp", "fwd"  # (for messages)

    def __repr__(self):
        return f"custom_vjp({self.name})"


def _custom_vjp_call_shape(*in_types, rule, n_args, n_out, n_res):
    return tuple(in_types[n_args:n_args + n_out])


def _custom_vjp_call_impl(*vals, rule, n_args, n_out, n_res):
    return tuple(vals[n_args:n_args + n_out])


def _custom_vjp_call_vjp(ct, *primals, out, rule, n_args, n_out, n_res):
    """The cotangents of a custom_vjp call's arguments: rule.bwd(*nondiff, residuals, ct)."""
    res_leaves = list(primals[n_args + n_out:n_args + n_out + n_res])
    for pos, leaf in sorted(rule.res_static.items()):
        res_leaves.insert(pos, leaf)
    res = tree_unflatten(rule.res_tree, res_leaves)
    g = tree_unflatten(rule.out_tree, list(ct))
    got = rule.bwd(*rule.nondiff, res, g)
    n = len(rule.arg_trees)
    if not isinstance(got, tuple | list) or len(got) != n:
        raise TypeError(
            f"custom_vjp {rule.name}: the bwd rule must return a tuple with one cotangent per "
            f"differentiated argument ({n}), got "
            f"{type(got).__name__}{f' of length {len(got)}' if isinstance(got, tuple | list) else ''}")
    cts = []
    for i, (g_i, td) in enumerate(zip(got, rule.arg_trees, strict=True)):
        if g_i is None:
            cts += [None] * td.num_leaves
        else:
            leaves, gtd = tree_flatten(g_i)
            if gtd != td:  # None in a leaf's place: a zero cotangent for that leaf
                leaves, gtd = tree_flatten(g_i, is_leaf=lambda x: x is None)
            if gtd != td:
                raise TypeError(f"custom_vjp {rule.name}: the bwd rule's cotangent {i} has the "
                                f"structure {gtd}, but argument {i} has {td}")
            cts += leaves
    args_ct = []
    for j, (c, t) in enumerate(zip(cts, rule.arg_types, strict=True)):
        if c is None or not dtypes.is_inexact(t.dtype):
            args_ct.append(None)  # a zero cotangent, or an integer argument's (none)
            continue
        c = lax.convert_element_type(current_trace().lift(_as_array_like(c, "cotangent")), t.dtype)
        if c.shape != t.shape:
            raise ValueError(f"custom_vjp {rule.name}: the bwd rule's cotangent for argument "
                             f"leaf {j} has shape {c.shape}, but the argument has shape {t.shape}")
        args_ct.append(c)
    return tuple(args_ct) + (None,) * (len(primals) - n_args)


def _custom_vjp_call_cost(in_types, out_types, **params):
    from nova.core.primitive import Cost

    return Cost(0, sum(t.nbytes for t in out_types))


def _marker(name: str, vjp, jvp):
    """The unregistered primitive of a custom rule's marker (see the module docstring): its
    results are its primal-output inputs."""
    from nova.core.primitive import FusionKind, Primitive, Template

    return Primitive(
        name, shape_rule=_custom_vjp_call_shape, impl=_custom_vjp_call_impl, vjp=vjp, jvp=jvp,
        fusion=FusionKind.OPAQUE, kernel=Template(name), cost=_custom_vjp_call_cost,
        multiple_results=True, registered=False)


_custom_vjp_call_p = _marker(CUSTOM_VJP_CALL, _custom_vjp_call_vjp, None)


# .running: (id of a custom_vjp function, id of the trace) while its fwd runs in that trace (a
# jit traced inside fwd records into a trace of its own, where the function keeps its rule).
_in_fwd = threading.local()


def _is_array_leaf(x) -> bool:
    return isinstance(x, Array | np.ndarray | np.generic | int | float | bool)


class _CustomFunction:
    """What custom_vjp and custom_jvp share: the function, its static argument positions,
    method binding, and the binding of a call's arguments."""

    kind = "custom"

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(sorted({int(i) for i in nondiff_argnums}))

    def _name(self) -> str:
        return getattr(self.fun, "__qualname__", getattr(self.fun, "__name__", "f"))

    def __get__(self, obj, objtype=None):  # a method: bind as functions do
        return self if obj is None else functools.partial(self, obj)

    def _positional(self, args: tuple, kwargs: dict) -> tuple:
        """The call's arguments as one positional tuple (fun's signature); raises ValueError
        when nondiff_argnums names a position outside them."""
        name = self._name()
        args = _bind_positional(self.fun, args, kwargs, name, self.kind)
        for i in self.nondiff_argnums:
            if not -len(args) <= i < len(args):
                raise ValueError(f"{self.kind} {name}: nondiff_argnums {self.nondiff_argnums} "
                                 f"names argument {i}, but {len(args)} were given")
        return args


class custom_vjp(_CustomFunction):
    """A function with a reverse-mode derivative of its own, as `jax.custom_vjp`.

    ::

        @nova.custom_vjp
        def f(x, y): ...
        def f_fwd(x, y): return f(x, y), residuals      # (primal output, residuals)
        def f_bwd(residuals, g): return (dx, dy)         # one cotangent per argument
        f.defvjp(f_fwd, f_bwd)

    Called outside any transform, `f` runs `fun` itself. Inside one (grad, vjp, jit), Nova runs
    `fwd` and records a marker; reverse mode meets the marker and calls `bwd(*nondiff,
    residuals, g)` with g the output's cotangent (the structure, shapes and dtypes of the
    output; zeros where no cotangent flows) instead of differentiating what fwd recorded.
    Under jit without a derivative, the marker goes when the trace becomes a Program, and what
    only the residuals needed is removed as dead code. fwd must return f's output: the primal
    value is taken from it.

    Arguments: positional or keyword (bound to `fun`'s signature), pytrees of arrays;
    `nondiff_argnums` lists positions of static arguments (Python values, callables) that are
    passed to bwd first and get no cotangent. Residuals: a pytree of arrays (other leaves pass
    through as they are). bwd returns a tuple with one entry per differentiated argument, each
    of that argument's structure and leaf shapes (None: a zero cotangent); integer arguments'
    entries are ignored. Higher order: reverse mode through bwd's own operations. Forward mode
    (`jvp`) is derived by transposing bwd, which must then be linear in g.

    Raises AttributeError when called before `defvjp`; TypeError when fwd does not return a
    pair, an argument leaf is not an array (give it a `nondiff_argnums` position), or bwd
    returns the wrong number or structure of cotangents; ValueError for a cotangent of the
    wrong shape or a nondiff_argnums position outside the arguments.
    """

    kind = "custom_vjp"

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        super().__init__(fun, nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        """Sets the rule: fwd(*args) -> (output, residuals); bwd(*nondiff, residuals, g) ->
        a tuple of cotangents, one per differentiated argument."""
        if not callable(fwd) or not callable(bwd):
            raise TypeError(f"custom_vjp {self._name()}: defvjp takes two functions, got "
                            f"{type(fwd).__name__} and {type(bwd).__name__}")
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args, **kwargs):
        name = self._name()
        if self.fwd is None:
            raise AttributeError(f"no VJP defined for the custom_vjp function {name}: call "
                                 f"{getattr(self.fun, '__name__', 'f')}.defvjp(fwd, bwd) first")
        args = self._positional(args, kwargs)
        trace = current_trace()
        running = getattr(_in_fwd, "running", None) or set()
        if trace is None or (id(self), id(trace)) in running:
            # Outside transforms, or inside this function's own fwd rule (which calls it, as
            # `f_fwd` returning `f(x), res` does): what fwd records is never differentiated
            # through its own marker, so the primal function is all it needs. (Other custom_vjp
            # functions inside a fwd keep their rules: a gradient fwd takes, a jit it traces.)
            return self.fun(*args)
        if any(f == id(self) for f, _ in running):
            # Its fwd runs in another trace, which this one serves (fwd calls a jit of this
            # function): recording a marker would run fwd again, without end. The function
            # runs bare, and jit does not keep this trace's Program (Trace.rules_bypassed).
            trace.rules_bypassed = True
            return self.fun(*args)
        nondiff, arg_trees, flat, new_args = _lift_arguments(
            trace, "custom_vjp", name, self.fun, args, self.nondiff_argnums,
            " (bwd may return None for them)")
        with trace_context(trace):
            _in_fwd.running = running
            running.add((id(self), id(trace)))
            start = len(trace.eqns)
            try:
                res = self.fwd(*new_args)
            finally:
                running.discard((id(self), id(trace)))
            if not (isinstance(res, tuple) and len(res) == 2):
                raise TypeError(f"custom_vjp {name}: fwd must return a pair (output, residuals), "
                                f"got {type(res).__name__}{_where()}")
            out, residuals = res
            out_leaves, out_tree = tree_flatten(out)
            out_tr = [trace.lift(o) for o in out_leaves]
            res_leaves, res_tree = tree_flatten(residuals)
            res_static = {j: r for j, r in enumerate(res_leaves) if not _is_array_leaf(r)}
            res_tr = [trace.lift(r) for j, r in enumerate(res_leaves) if j not in res_static]
        if not out_tr:
            return out
        closed = _closed_over(trace, start, flat, out_tr)
        rule = _CustomVJPRule(name, self.bwd, tuple(args[i] for i in sorted(nondiff)),
                              arg_trees, out_tree, res_tree, res_static,
                              [TensorType(t.shape, t.dtype) for t in flat])
        params = {"rule": rule, "n_args": len(flat), "n_out": len(out_tr), "n_res": len(res_tr)}
        outs = trace.add_eqn(_custom_vjp_call_p, flat + out_tr + res_tr + closed, params,
                             user_frame_line())
        return tree_unflatten(out_tree, outs)



def _lift_arguments(trace: Trace, kind: str, name: str, fun, args: tuple, nondiff_argnums,
                    note: str) -> tuple:
    """(positions of static arguments, one treedef per differentiated argument, their leaves
    lifted into `trace`, the arguments with those leaves in place) of a custom_vjp/custom_jvp
    call. Raises TypeError for a traced static argument or a differentiated leaf that is no
    array."""
    nondiff = {i % len(args) for i in nondiff_argnums}
    for i in sorted(nondiff):
        if any(isinstance(x, Tracer) for x in tree_leaves(args[i])):
            raise TypeError(
                f"{kind} {name}: argument {i} is in nondiff_argnums but holds a traced "
                f"array; pass arrays as differentiated arguments{note} and keep "
                f"nondiff_argnums for static Python values{_where()}")
    names = _arg_names(fun, len(args))
    arg_trees, flat = [], []
    new_args = list(args)
    with trace_context(trace):
        for i in (i for i in range(len(args)) if i not in nondiff):
            leaves, td = tree_flatten(args[i])
            for x in leaves:
                if not _is_array_leaf(x):
                    raise TypeError(
                        f"{kind} {name}: argument '{names[i]}' holds a {type(x).__name__}, "
                        f"which is not an array; pass it through nondiff_argnums=({i},) to "
                        f"keep it static{_where()}")
            lifted = [trace.lift(x) for x in leaves]
            arg_trees.append(td)
            flat += lifted
            new_args[i] = tree_unflatten(td, lifted)
    return nondiff, arg_trees, flat, new_args

def _closed_over(trace: Trace, start: int, given: list, outs: tuple = ()) -> list:
    """Tracers of values a fwd rule (a custom_jvp's function) read, or returned as outputs
    `outs` unchanged, that were made before it started and are neither its arguments
    (`given`) nor input-free (constants): values it closed over. They join the marker's inputs
    so that reverse and forward mode can refuse to differentiate through them (their
    derivative would be dropped: the rules give derivatives for the arguments only)."""
    made = {id(o) for e in trace.eqns[start:] for o in e.outputs}
    known = {id(t._var) for t in given} | made
    out, seen = [], set()
    read = [v for e in trace.eqns[start:] for v in e.inputs] + [t._var for t in outs]
    for v in read:
        if id(v) in known or id(v) in seen or id(v) in trace._input_free:
            continue
        seen.add(id(v))
        out.append(trace.tracer_of(v))
    return out


def _bind_positional(f, args: tuple, kwargs: dict, name: str, kind: str = "custom_vjp") -> tuple:
    """args and kwargs as one positional tuple by f's signature (defaults filled in)."""
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):  # no signature (a builtin): as given
        if kwargs:
            raise TypeError(f"{kind} {name}: keyword arguments need a function with a "
                            "signature") from None
        return args
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{kind} {name}: {e}") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"{kind} {name}: keyword-only arguments {sorted(bound.kwargs)} are "
                        "not supported; make them positional or close over them")
    return tuple(bound.args)


def batched_rule(rule, size: int, axis_name=None):
    """The rule of a custom_vjp / custom_jvp call mapped by `nova.vmap` over `size` examples
    (nova/batching.py): the call's arguments, outputs and residuals all gain a leading axis of
    `size`, and the rule is the vmap of the user's (static arguments and non-array residual
    leaves passed to every example as they are), with the mapping vmap's axis_name bound, so
    collectives in the rule (psum in a checkpoint's recomputation) see the same axis."""
    from nova.batching import vmap

    def up(types):
        return [TensorType((size, *t.shape), t.dtype) for t in types]

    if isinstance(rule, _CustomVJPRule):
        def bwd(res, g):
            leaves, td = tree_flatten(res)
            pos = [i for i in range(len(leaves)) if i not in rule.res_static]

            def one(arrays, g):
                full = list(leaves)
                for i, a in zip(pos, arrays, strict=True):
                    full[i] = a
                return rule.bwd(*rule.nondiff, tree_unflatten(td, full), g)

            return vmap(one, axis_name=axis_name)([leaves[i] for i in pos], g)

        return _CustomVJPRule(rule.name, bwd, (), rule.arg_trees, rule.out_tree, rule.res_tree,
                              rule.res_static, up(rule.arg_types))

    def jvp(primals, tangents):
        # Each example's tangent output as the rule's checks make it (zeros for None, scalars
        # broadcast to the output's shape) before the examples are stacked. (The primal output
        # of a custom_jvp rule is not used.)
        def one(p, t):
            return tree_unflatten(rule.out_tree, rule.tangents_out(tree_leaves(p), tree_leaves(t)))

        return None, vmap(one, axis_name=axis_name)(primals, tangents)

    return _CustomJVPRule(rule.name, jvp, (), rule.arg_trees, rule.out_tree,
                          up(rule.arg_types), up(rule.out_types))


# --- custom_jvp ------------------------------------------------------------------------------------


class _CustomJVPRule:
    """What the marker of one custom_jvp call needs to apply the jvp rule: the rule, the static
    (nondiff) arguments, the structures of the differentiated arguments and of the output, and
    the argument leaves' types."""

    kind, primal_fn = "custom_jvp", "function"  # (for messages)

    def __init__(self, name, jvp, nondiff, arg_trees, out_tree, arg_types, out_types):
        self.name = name
        self.jvp = jvp
        self.nondiff = nondiff
        self.arg_trees = arg_trees
        self.out_tree = out_tree
        self.arg_types = arg_types
        self.out_types = out_types

    def __repr__(self):
        return f"custom_jvp({self.name})"

    def tangents_out(self, arg_leaves: list, tangent_leaves: list) -> list:
        """The rule's tangent output leaves (lifted into the current trace, of the output's
        shapes and dtypes) for these argument and tangent leaves."""
        def tree(leaves):
            out, k = [], 0
            for td in self.arg_trees:
                out.append(tree_unflatten(td, leaves[k:k + td.num_leaves]))
                k += td.num_leaves
            return tuple(out)

        # A call of the function inside its own rule (`ans = f(x)`) records a marker of its
        # own: higher orders then meet the rule again, as in JAX. (No recursion: recording a
        # marker runs fun, never the rule.)
        got = self.jvp(*self.nondiff, tree(arg_leaves), tree(tangent_leaves))
        if isinstance(got, list) and len(got) == 2:
            got = tuple(got)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise TypeError(f"custom_jvp {self.name}: the jvp rule must return a pair "
                            f"(primal_out, tangent_out), got {type(got).__name__}{_where()}")
        _, t_out = got
        leaves, td = tree_flatten(t_out)
        if td != self.out_tree:
            leaves, td = tree_flatten(t_out, is_leaf=lambda x: x is None)
        if td != self.out_tree:
            raise TypeError(f"custom_jvp {self.name}: the jvp rule's tangent_out has the "
                            f"structure {td}, but the function's output has {self.out_tree}")
        trace = current_trace()
        out = []
        for j, (t, ty) in enumerate(zip(leaves, self.out_types, strict=True)):
            if t is None or not dtypes.is_inexact(ty.dtype):
                out.append(lax.full(ty.shape, 0, ty.dtype))
                continue
            t = lax.convert_element_type(trace.lift(_as_array_like(t, "tangent")), ty.dtype)
            if t.shape != ty.shape:
                try:
                    fits = np.broadcast_shapes(t.shape, ty.shape) == ty.shape
                except ValueError:
                    fits = False
                if not fits:
                    raise ValueError(f"custom_jvp {self.name}: the jvp rule's tangent for output "
                                     f"leaf {j} has shape {t.shape}, but the output has shape "
                                     f"{ty.shape}")
                lead = len(ty.shape) - t.ndim  # NumPy's rule: align trailing axes
                t = lax.broadcast_in_dim(t, ty.shape, tuple(range(lead, len(ty.shape))))
            out.append(t)
        return out


def _custom_jvp_call_jvp(ts, *primals, out, rule, n_args, n_out, n_res):
    """Forward mode at a custom_jvp call: the user's rule on the argument tangents."""
    return tuple(rule.tangents_out(list(primals[:n_args]), list(ts[:n_args])))


def _custom_jvp_call_vjp(ct, *primals, out, rule, n_args, n_out, n_res):
    """Reverse mode at a custom_jvp call: the jvp rule traced with fresh tangent variables, then
    reverse mode over the equations computing the tangent output from them. Those are linear in
    the tangents (a jvp rule's tangent output is), so their VJP is the transpose of the rule."""
    trace = current_trace()
    args = list(primals[:n_args])
    ts = [lax.copy(_zeros_like(a)) for a in args]  # each its own variable
    start = len(trace.eqns)
    t_out = rule.tangents_out(args, ts)
    wrt = [t._var for a, t in zip(args, ts, strict=True) if dtypes.is_inexact(a.dtype)]
    cts = list(ct) if isinstance(ct, tuple) else [ct]
    got = iter(backward_pass(trace, start, len(trace.eqns), wrt, [t._var for t in t_out], cts))
    args_ct = [next(got) if dtypes.is_inexact(a.dtype) else None for a in args]
    return tuple(args_ct) + (None,) * (len(primals) - n_args)


_custom_jvp_call_p = _marker(CUSTOM_JVP_CALL, _custom_jvp_call_vjp, _custom_jvp_call_jvp)


class custom_jvp(_CustomFunction):
    """A function with a forward-mode derivative of its own, as `jax.custom_jvp`.

    ::

        @nova.custom_jvp
        def f(x, y): ...
        @f.defjvp
        def f_jvp(primals, tangents):            # (x, y), (tx, ty)
            x, y = primals
            out = f(x, y)
            return out, tangent_out               # same structure, shapes, dtypes as out

        f.defjvps(lambda tx, out, x, y: ..., None)   # or one rule per argument (None: zero)

    Called outside any transform, `f` runs `fun`. Inside one (grad, vjp, jvp, jit), f's value
    comes from `fun` and a marker is recorded: forward mode (`nova.jvp`) calls the rule on the
    arguments' tangents; reverse mode (`grad`, `vjp`) transposes the rule's tangent output,
    which must be linear in the tangents (as in JAX, which linearizes and transposes it). Under
    jit without a derivative only `fun` remains. Higher order differentiates the rule's own
    operations (it must be differentiable itself for second derivatives); a call of `f` inside
    the rule (`ans = f(x)`) is a call like any other, so higher orders meet the rule there
    again. The rule's primal_out is not used: the value is fun's (JAX takes the rule's under
    jvp).

    Arguments: positional or keyword (bound to `fun`'s signature), pytrees of arrays;
    `nondiff_argnums` lists positions of static arguments, passed to the rule first
    (`rule(*nondiff, primals, tangents)`) and kept out of primals and tangents. Tangents of
    integer arguments are zeros; the rule's tangent_out may hold None (a zero) and scalars or
    arrays that broadcast to the output leaf's shape; it is converted to the output's dtype.

    Raises AttributeError when called before `defjvp`; TypeError when the rule does not return a
    pair or tangent_out's structure differs from the output's, an argument leaf is not an array
    (give it a `nondiff_argnums` position), a nondiff argument is traced, or `fun` closes over a
    value being differentiated; ValueError for a tangent that does not broadcast to its
    output's shape or a nondiff_argnums position outside the arguments.
    """

    kind = "custom_jvp"

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        super().__init__(fun, nondiff_argnums)
        self.jvp: Callable | None = None

    def defjvp(self, jvp: Callable) -> Callable:
        """Sets the rule jvp(*nondiff, primals, tangents) -> (primal_out, tangent_out); returns
        it (so it works as a decorator)."""
        if not callable(jvp):
            raise TypeError(f"custom_jvp {self._name()}: defjvp takes a function, got "
                            f"{type(jvp).__name__}")
        self.jvp = jvp
        return jvp

    def defjvps(self, *tangent_fns: Callable | None) -> None:
        """Sets the rule from one function per differentiated argument: fn_i(t_i, primal_out,
        *primals) -> that argument's contribution to tangent_out (None: none); the
        contributions are added."""
        fun = self

        def jvp(*nondiff_primals_tangents):
            *nondiff, primals, tangents = nondiff_primals_tangents
            if len(tangent_fns) != len(primals):
                raise TypeError(f"custom_jvp {fun._name()}: defjvps got {len(tangent_fns)} "
                                f"functions for {len(primals)} differentiated arguments")
            out = fun(*_with_nondiff(fun.nondiff_argnums, nondiff, primals))
            acc = None
            for fn, t in zip(tangent_fns, tangents, strict=True):
                if fn is None:
                    continue
                term = fn(t, out, *primals)
                acc = term if acc is None else _tree_add(acc, term)
            if acc is None:
                acc = _tree_map(lambda o: None, out)
            return out, acc

        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        name = self._name()
        if self.jvp is None:
            raise AttributeError(f"no JVP defined for the custom_jvp function {name}: call "
                                 f"{getattr(self.fun, '__name__', 'f')}.defjvp(rule) first")
        args = self._positional(args, kwargs)
        trace = current_trace()
        if trace is None:  # outside transforms
            return self.fun(*args)
        nondiff, arg_trees, flat, new_args = _lift_arguments(
            trace, "custom_jvp", name, self.fun, args, self.nondiff_argnums, "")
        with trace_context(trace):
            start = len(trace.eqns)
            out = self.fun(*new_args)
            out_leaves, out_tree = tree_flatten(out)
            out_tr = [trace.lift(o) for o in out_leaves]
        if not out_tr:
            return out
        closed = _closed_over(trace, start, flat, out_tr)
        rule = _CustomJVPRule(name, self.jvp, tuple(args[i] for i in sorted(nondiff)),
                              arg_trees, out_tree, [TensorType(t.shape, t.dtype) for t in flat],
                              [TensorType(t.shape, t.dtype) for t in out_tr])
        params = {"rule": rule, "n_args": len(flat), "n_out": len(out_tr), "n_res": 0}
        outs = trace.add_eqn(_custom_jvp_call_p, flat + out_tr + closed, params,
                             user_frame_line())
        return tree_unflatten(out_tree, outs)


def _with_nondiff(nondiff_argnums, nondiff, primals) -> tuple:
    """The full positional arguments from the static ones and the differentiated ones."""
    n = len(nondiff) + len(primals)
    pos = {i % n for i in nondiff_argnums}
    it_s, it_p = iter(nondiff), iter(primals)
    return tuple(next(it_s) if i in pos else next(it_p) for i in range(n))


def _tree_map(f, tree):
    leaves, td = tree_flatten(tree)
    return tree_unflatten(td, [f(x) for x in leaves])


def _tree_add(a, b):
    la, ta = tree_flatten(a, is_leaf=lambda x: x is None)
    lb, tb = tree_flatten(b, is_leaf=lambda x: x is None)
    if ta != tb:
        raise TypeError(f"custom_jvp: defjvps terms of structures {ta} and {tb} cannot be added")
    return tree_unflatten(ta, [y if x is None else x if y is None else x + y
                               for x, y in zip(la, lb, strict=True)])


def custom_gradient(fun: Callable) -> Callable:
    """A function whose reverse-mode derivative `fun` gives itself (jax.custom_gradient):
    `fun(*args)` returns `(out, vjp_fn)`, where `vjp_fn(ct)` maps a cotangent of `out` to the
    cotangents of the positional arguments (a tuple with one per argument; a single value is
    taken for a one-argument function). Built on custom_vjp: vjp_fn, with what it closed over
    in fun, is the residual, so it may read fun's intermediate values. Forward mode transposes
    vjp_fn (it must be linear in ct). Raises TypeError (from custom_vjp) when vjp_fn returns
    the wrong number or structure of cotangents."""
    name = getattr(fun, "__name__", "f")

    def primal(*args):
        return fun(*args)[0]

    primal.__name__ = name
    rule = custom_vjp(primal)

    def fwd(*args):
        res = fun(*args)
        if not (isinstance(res, tuple) and len(res) == 2 and callable(res[1])):
            raise TypeError(f"custom_gradient {name}: the function must return (output, "
                            f"vjp_fn), got {type(res).__name__}")
        return res[0], (res[1],)

    def bwd(res, ct):
        cts = res[0](ct)
        return cts if isinstance(cts, tuple) else (cts,)

    rule.defvjp(fwd, bwd)
    return functools.wraps(fun)(rule)
