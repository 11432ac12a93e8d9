"""Reverse and forward mode over the Program: `vjp`, `grad`, `value_and_grad`, `jvp`.

Reverse mode walks the recorded equations backward, calling each primitive's VJP rule; the rules
bind Nova primitives, so the backward is appended to the same Program as the forward (DESIGN.md
"grad"). Under `jit` this yields one program holding forward and backward together; outside `jit`
the trace is concrete (values are computed as equations are recorded), so Python control flow on
values works, as in JAX; with GPU arguments those values are computed on the GPU op by op and
stay there (core/trace.py Trace.device). Transforms nest by recording into the one current
trace, so grad-of-grad differentiates the backward equations of the inner grad like any others.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import UnexpectedTracerError
from nova.core.ir import TensorType, Var
from nova.core.pytree import tree_flatten, tree_leaves, tree_unflatten
from nova.core.source_info import attributed_to, short, user_frame_line
from nova.core.trace import CUSTOM_CALLS, Trace, Tracer, current_trace, trace_context
from nova.ops import lax


class _Scope:
    """Where a transform records: the current trace, or a new concrete one if none is active.

    A new trace follows its arguments' device, as eager ops do: with a GPU Array among `args`
    its equations on GPU values run on that GPU op by op (Trace.device) and the results are GPU
    Arrays; host arguments join as host values, uploaded when first combined with GPU ones."""

    def __init__(self, *args):
        outer = current_trace()
        self.new = outer is None
        self.device = None
        if self.new:
            for leaf in tree_leaves(args):
                if leaf._on_device if isinstance(leaf, Array) else False:
                    self.device = leaf.device
                    break
            self.trace = Trace(concrete=True, device=self.device)
        else:
            self.trace = outer

    def enter_inputs(self, flat: list, names: list[str]) -> list[Tracer]:
        """Fresh values standing for the differentiated arguments of this transform."""
        out = []
        with trace_context(self.trace):
            for x, name in zip(flat, names, strict=True):
                if self.new:
                    if isinstance(x, Array) and x._on_device and not x._deleted:
                        v = x  # stays on its GPU
                        self.trace.borrowed.add(id(x))
                    else:
                        v = _as_value(x, name)
                    out.append(self.trace.new_input(TensorType(v.shape, v.dtype), v, name))
                else:
                    # A copy gives this transform its own variable, so an outer transform's use
                    # of the same value is not confused with this one's (perturbation confusion).
                    out.append(lax.copy(self.trace.lift(_as_array_like(x, name))))
        return out

    def export(self, tree):
        """Results leave the transform: concrete arrays if the trace is ours, tracers otherwise.
        Values computed on a GPU leave as the GPU Arrays they are; with GPU arguments, values
        computed on the host are put on the arguments' GPU."""
        if not self.new:
            return tree
        leaves, td = tree_flatten(tree)
        out, seen = [], set()
        for x in leaves:
            if isinstance(x, Tracer):
                v = x._val
                if v is not None and type(v) is not np.ndarray:  # a GPU Array
                    # Each result an array of its own, never an argument (donating a result
                    # must not delete an argument or another result).
                    if id(v) in seen or id(v) in self.trace.borrowed:
                        v = _copy_on_device(v)
                    seen.add(id(v))
                    out.append(v)
                    continue
                # Each result a buffer of its own: two results may be one traced value (the
                # zero gradients of two unused arguments share their recorded zeros).
                v = x._concretize("a result")
                if id(v) in seen or not v.flags.writeable:
                    v = np.array(v, copy=True)
                seen.add(id(v))
                x = Array(v)
            out.append(x)
        if self.device is not None:
            from nova.runtime.devices import device_put

            out = [device_put(x, self.device) if isinstance(x, Array) else x for x in out]
        return tree_unflatten(td, out)


def _copy_on_device(x: Array) -> Array:
    """A GPU Array equal to x in a buffer of its own (the eager copy op on its GPU)."""
    with trace_context(None):
        return lax.copy(x)


def _as_value(x, name) -> np.ndarray:
    if isinstance(x, Tracer):
        return x._concretize(f"argument {name}")
    if isinstance(x, Array):
        return x._concrete(f"argument {name}")
    if isinstance(x, np.ndarray | np.generic | int | float | bool | list):
        return np.asarray(x, dtype=dtypes.dtype_of_value(x))
    raise TypeError(f"argument {name}: expected an array or a Python scalar, got {type(x).__name__}")


def _as_array_like(x, name):
    if isinstance(x, Array):
        return x
    return Array(_as_value(x, name))


def _zeros_like(t):
    return lax.full(t.shape, 0, t.dtype)


def _accumulate(env: dict, var: Var, ct):
    prev = env.get(id(var))
    env[id(var)] = ct if prev is None else lax.add(prev, ct)


def backward_pass(trace: Trace, start: int, end: int, wrt: list[Var], outs: list[Var], out_cts,
                  source: Trace | None = None):
    """Appends to `trace` the cotangents of `wrt` given cotangents `out_cts` of `outs`.

    Only equations in source.eqns[start:end] that depend on `wrt` are differentiated; `source`
    (default: `trace`) is the trace that recorded them. With another trace than `trace` (a
    vjp_fn called under jit or vmap, as JAX's linearized function is), the primal values the
    rules read enter `trace` as it lifts them: as constants from a finished eager transform, as
    captured inputs from an enclosing one. Returns a list (one entry per wrt var) of tracers,
    or None where the cotangent is zero.
    """
    source = trace if source is None else source
    active = {id(v) for v in wrt}
    relevant = []
    for e in source.eqns[start:end]:
        if e.prim.differentiable and any(id(v) in active for v in e.inputs):
            relevant.append(e)
            active.update(id(o) for o in e.outputs if dtypes.is_inexact(o.type.dtype))
    env: dict[int, object] = {}
    prev_stage, trace.stage = trace.stage, "bwd"
    try:
        return _backward_walk(trace, _primal_lookup(trace, source), relevant, active, env, wrt,
                              outs, out_cts)
    finally:
        trace.stage = prev_stage


def _primal_lookup(trace: Trace, source: Trace) -> Callable:
    """var of `source` -> its value as a tracer of `trace` (lifted once per var)."""
    if source is trace:
        return trace.tracer_of
    lifted: dict[int, Tracer] = {}

    def primal(var: Var) -> Tracer:
        hit = lifted.get(id(var))
        if hit is None:
            t = source.tracer_of(var)
            if source.concrete and not trace._is_ancestor(source):
                # a value of a finished eager transform: a constant here (JAX's residuals)
                hit = trace.lift(t._val if isinstance(t._val, Array) else Array(t._val))
            else:
                hit = trace.lift(t)  # captured from an enclosing trace, or an escaped tracer
            lifted[id(var)] = hit
        return hit

    return primal


def _backward_walk(trace, primal, relevant, active, env, wrt, outs, out_cts):
    with trace_context(trace):
        for o, ct in zip(outs, out_cts, strict=True):
            if ct is not None and id(o) in active:
                _accumulate(env, o, trace.lift(ct))
        for e in reversed(relevant):
            cts = [env.pop(id(v), None) for v in e.outputs]
            if all(c is None for c in cts):
                continue
            out_tr = [primal(v) for v in e.outputs]
            if e.prim.multiple_results:
                ct = tuple(c if c is not None else _zeros_like(t) for c, t in zip(cts, out_tr, strict=True))
                out = tuple(out_tr)
            else:
                ct, out = cts[0], out_tr[0]
            primals = [primal(v) for v in e.inputs]
            if e.prim.name in CUSTOM_CALLS:
                _check_closure(primal, e, active)
            with attributed_to(e.source):
                cts_in = e.prim.vjp(ct, *primals, out=out, **e.params)
            for v, c in zip(e.inputs, cts_in, strict=True):
                if c is not None and id(v) in active:
                    _accumulate(env, v, c)
    return [env.get(id(w)) for w in wrt]


def _check_closure(primal: Callable, e, active: set) -> None:
    """Raises TypeError when a custom_vjp call's fwd (a custom_jvp call's function) closed over
    a value being differentiated: the rule gives derivatives for the arguments only, so that
    value's would silently be zero (jax.custom_vjp raises too)."""
    p = e.params
    rule = p["rule"]
    for v in e.inputs[p["n_args"] + p["n_out"] + p["n_res"]:]:
        if id(v) in active:
            t = primal(v)
            raise TypeError(
                f"{rule.kind} {rule.name}: its {rule.primal_fn} closes over a value that is "
                f"being differentiated ({t.aval}, created at {short(t._source)}); its "
                "derivative would be lost: pass it to the function as an argument (and give "
                "the rule a derivative for it)")


def _jvp_via_vjp(trace: Trace, e, primals, tangents, out_tr):
    """J·t from a linear VJP rule: d/du <vjp(u), t>, for primitives without a JVP rule.
    out_tr: e's outputs as tracers of `trace`."""
    us = [lax.copy(_zeros_like(o)) for o in out_tr]
    start = len(trace.eqns)
    ct = tuple(us) if e.prim.multiple_results else us[0]
    out = tuple(out_tr) if e.prim.multiple_results else out_tr[0]
    cts_in = e.prim.vjp(ct, *primals, out=out, **e.params)
    s = None
    for c, t in zip(cts_in, tangents, strict=True):
        if c is None or not dtypes.is_inexact(c.dtype):
            continue
        term = lax.reduce_sum(lax.mul(c, t), tuple(range(c.ndim)))
        s = term if s is None else lax.add(s, term)
    if s is None:
        res = [_zeros_like(o) for o in out_tr]
    else:
        one = lax.full((), 1, s.dtype)
        got = backward_pass(trace, start, len(trace.eqns), [u._var for u in us], [s._var], [one])
        res = [g if g is not None else _zeros_like(o) for g, o in zip(got, out_tr, strict=True)]
    return tuple(res) if e.prim.multiple_results else res[0]


def forward_pass(trace: Trace, start: int, end: int, wrt: list[Var], tangents: list,
                 source: Trace | None = None) -> dict:
    """Appends to `trace` tangent equations for source.eqns[start:end] (`source` defaults to
    `trace`; another trace is linearize's recorded forward, read as backward_pass reads it);
    returns {id(var): tangent tracer}."""
    source = trace if source is None else source
    primal = _primal_lookup(trace, source)
    tan: dict[int, object] = {id(w): t for w, t in zip(wrt, tangents, strict=True)}
    with trace_context(trace):
        for e in source.eqns[start:end]:
            if not e.prim.differentiable or not any(id(v) in tan for v in e.inputs):
                continue
            if e.prim.name in CUSTOM_CALLS:
                _check_closure(primal, e, tan)
            primals = [primal(v) for v in e.inputs]
            ts = [tan.get(id(v)) if id(v) in tan else _zeros_like(p) for v, p in zip(e.inputs, primals, strict=True)]
            out_tr = [primal(v) for v in e.outputs]
            with attributed_to(e.source):
                if e.prim.jvp is not None:
                    out = tuple(out_tr) if e.prim.multiple_results else out_tr[0]
                    t_out = e.prim.jvp(ts, *primals, out=out, **e.params)
                else:
                    t_out = _jvp_via_vjp(trace, e, primals, ts, out_tr)
            t_out = list(t_out) if e.prim.multiple_results else [t_out]
            for v, t in zip(e.outputs, t_out, strict=True):
                if dtypes.is_inexact(v.type.dtype):
                    tan[id(v)] = t
    return tan


# --- public transforms ---------------------------------------------------------------------------


def _where() -> str:
    return f" (at {short(user_frame_line())})"


def _arg_names(f, n) -> list[str]:
    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(n)]


def _leaf_names(tree, name) -> list[str]:
    leaves, _ = tree_flatten(tree)
    return [name if len(leaves) == 1 else f"{name}[{i}]" for i in range(len(leaves))]


def _check_float_inputs(leaves, names, what):
    for x, n in zip(leaves, names, strict=True):
        d = getattr(x, "dtype", None)
        d = np.dtype(d) if d is not None else dtypes.dtype_of_value(x)
        if not dtypes.is_inexact(d):
            raise TypeError(
                f"{what} requires floating-point inputs, but argument '{n}' has dtype {d}. "
                "Integer and bool inputs have no gradient: convert with .astype(float32) or "
                f"leave them out of argnums.{_where()}"
            )


def vjp(f: Callable, *primals, has_aux: bool = False):
    """Returns `(f(*primals), vjp_fn)` (and `aux` if has_aux), where vjp_fn(ct) -> cotangents.

    primals: pytrees of float arrays. vjp_fn takes a cotangent with the structure, shapes and dtypes
    of f's output and returns a tuple with one cotangent pytree per primal.
    Raises TypeError for integer/bool primals.
    """
    names = _arg_names(f, len(primals))
    flat, in_tree = tree_flatten(list(primals))
    leaf_names = [n for p, nm in zip(primals, names, strict=True) for n in _leaf_names(p, nm)]
    _check_float_inputs(flat, leaf_names, "vjp")
    scope = _Scope(flat)
    xs = scope.enter_inputs(flat, leaf_names)
    start = len(scope.trace.eqns)
    with trace_context(scope.trace):
        res = f(*tree_unflatten(in_tree, xs))
        out, aux = res if has_aux else (res, None)
        out_leaves, out_tree = tree_flatten(out)
        out_tr = [scope.trace.lift(o) for o in out_leaves]
    end = len(scope.trace.eqns)

    def vjp_fn(ct):
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != out_tree:
            raise ValueError(f"vjp_fn: cotangent structure {ct_tree} differs from output's {out_tree}")
        for c, o in zip(ct_leaves, out_tr, strict=True):
            if tuple(np.shape(c)) != o.shape:
                raise ValueError(f"vjp_fn: cotangent shape {np.shape(c)} differs from output shape {o.shape}")
        # The backward is recorded where vjp_fn is called: in vjp's own trace, or (vjp_fn under
        # jit or vmap, or inside a transform begun after vjp) in the trace current now, which
        # reads the forward's values as constants or captures (backward_pass `source`).
        here = current_trace()
        target = scope.trace if here is None or here is scope.trace else here
        if not scope.trace.active:
            raise UnexpectedTracerError(
                "vjp_fn: this pullback was made by vjp inside a jit (or vmap) trace that has "
                "finished; its forward values no longer exist. Call it inside that function, "
                f"or return what it computes from there{_where()}")
        with trace_context(target):
            cts = [lax.convert_element_type(target.lift(c), o.dtype) for c, o in zip(ct_leaves, out_tr, strict=True)]
            got = backward_pass(target, start, end, [x._var for x in xs], [o._var for o in out_tr], cts,
                                source=scope.trace)
            got = [_zeros_like(x) if g is None else g for g, x in zip(got, xs, strict=True)]
        if target is not scope.trace:
            return tuple(tree_unflatten(in_tree, got))
        return tuple(scope.export(tree_unflatten(in_tree, got)))

    result = scope.export(tree_unflatten(out_tree, out_tr))
    if has_aux:
        return result, vjp_fn, scope.export(aux)
    return result, vjp_fn


def value_and_grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False):
    """Returns a function computing `(f(*args), grad)` from one program (forward and backward).

    f must return a scalar float (or `(scalar, aux)` with has_aux=True, giving
    `((value, aux), grad)`). `grad` has the structure of args[argnums] (a tuple of them when
    argnums is a sequence). Complex arguments follow JAX's convention: for a real-valued f
    the gradient is the conjugate of df/dx + i df/dy (grad(abs)(3+4j) is 0.6-0.8j). With
    holomorphic=True, f returns a complex scalar, every differentiated argument is complex,
    and the result is f'(z) (grad(lambda z: z**2, holomorphic=True)(1j) is 2j).
    Raises TypeError for a non-scalar or non-float output (a complex one without
    holomorphic=True), for integer/bool differentiated arguments, and for real arguments or
    a real output with holomorphic=True.
    """
    multi = not isinstance(argnums, int)
    nums = tuple(argnums) if multi else (argnums,)

    def vg(*args, **kwargs):
        for i in nums:
            if not -len(args) <= i < len(args):
                raise ValueError(
                    f"argnums {argnums} refers to argument {i}, but only {len(args)} positional "
                    "arguments were given"
                )
        names = _arg_names(f, len(args))
        diff = [args[i] for i in nums]
        flat, in_tree = tree_flatten(diff)
        leaf_names = [n for i in nums for n in _leaf_names(args[i], names[i])]
        _check_float_inputs(flat, leaf_names, "grad")
        if holomorphic:
            for x, n in zip(flat, leaf_names, strict=True):
                d = getattr(x, "dtype", None)
                d = np.dtype(d) if d is not None else dtypes.dtype_of_value(x)
                if not dtypes.is_complex(d):
                    raise TypeError(f"grad with holomorphic=True requires complex inputs, but "
                                    f"argument '{n}' has dtype {d}{_where()}")
        scope = _Scope(args, kwargs)
        xs = scope.enter_inputs(flat, leaf_names)
        start = len(scope.trace.eqns)
        with trace_context(scope.trace):
            new_args = list(args)
            for i, sub in zip(nums, tree_unflatten(in_tree, xs), strict=True):
                new_args[i] = sub
            res = f(*new_args, **kwargs)
            fname = getattr(f, "__name__", "f")
            if has_aux and not (isinstance(res, tuple) and len(res) == 2):
                raise TypeError(
                    f"grad(has_aux=True) requires {fname} to return a pair (output, aux), got "
                    f"{type(res).__name__}{_where()}")
            out, aux = res if has_aux else (res, None)
            if not isinstance(out, Array | int | float | np.ndarray | np.generic):
                raise TypeError(
                    f"grad requires {fname} to return a scalar array, got a "
                    f"{type(out).__name__}; return (value, aux) with has_aux=True to carry "
                    f"other outputs{_where()}")
            o = scope.trace.lift(out)
            if o.shape != ():
                raise TypeError(
                    f"grad requires a scalar output, but {fname} returned "
                    f"shape {o.shape}; use vjp or jacobian-style code for non-scalar outputs"
                    f"{_where()}"
                )
            if holomorphic and not dtypes.is_complex(o.dtype):
                raise TypeError(f"grad with holomorphic=True requires a complex output, got "
                                f"dtype {o.dtype}{_where()}")
            if not holomorphic and dtypes.is_complex(o.dtype):
                raise TypeError(f"grad requires a real-valued output, got dtype {o.dtype}; "
                                f"pass holomorphic=True to differentiate a holomorphic "
                                f"function{_where()}")
            if not dtypes.is_inexact(o.dtype):
                raise TypeError(f"grad requires a float output, got dtype {o.dtype}{_where()}")
            end = len(scope.trace.eqns)
            one = lax.full((), 1, o.dtype)
            got = backward_pass(scope.trace, start, end, [x._var for x in xs], [o._var], [one])
            got = [g if g is not None else _zeros_like(x) for g, x in zip(got, xs, strict=True)]
        grads = tree_unflatten(in_tree, got)
        g = tuple(grads) if multi else grads[0]
        value = (o, aux) if has_aux else o
        return scope.export(value), scope.export(g)

    vg.__name__ = f"value_and_grad({getattr(f, '__name__', 'f')})"
    vg.__wrapped__ = f
    return vg


def grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False):
    """The gradient of a scalar function: `grad(f)(*args)` has the structure of args[argnums].

    With has_aux=True returns `(grad, aux)`. Complex arguments and holomorphic=True as for
    value_and_grad. Errors as for value_and_grad.
    """
    vg = value_and_grad(f, argnums, has_aux, holomorphic)

    def g(*args, **kwargs):
        value, gr = vg(*args, **kwargs)
        return (gr, value[1]) if has_aux else gr

    g.__name__ = f"grad({getattr(f, '__name__', 'f')})"
    g.__wrapped__ = f
    return g


def _check_tangents(flat, in_tree, tangents, leaf_names, what: str) -> list:
    """The leaves of `tangents`, checked against the primal leaves `flat` (tree `in_tree`):
    equal structure (ValueError), shapes (ValueError) and dtypes (TypeError)."""
    tflat, t_tree = tree_flatten(list(tangents))
    if in_tree != t_tree:
        raise ValueError(f"{what}: primal structure {in_tree} differs from tangent structure "
                         f"{t_tree}")
    for p, t, n in zip(flat, tflat, leaf_names, strict=True):
        if tuple(np.shape(p)) != tuple(np.shape(t)):
            raise ValueError(f"{what}: tangent for '{n}' has shape {np.shape(t)}, primal "
                             f"{np.shape(p)}")
        pd, td = getattr(p, "dtype", None), getattr(t, "dtype", None)
        if pd is not None and td is not None and np.dtype(pd) != np.dtype(td):
            # as jax.jvp: a float64 tangent of a float32 primal is a mistake, not a cast
            raise TypeError(f"{what}: tangent for '{n}' has dtype {np.dtype(td)}, but its "
                            f"primal has dtype {np.dtype(pd)}; they must be equal{_where()}")
    return tflat


def jvp(f: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False):
    """Forward mode: returns `(f(*primals), J·tangents)`.

    primals and tangents are sequences (tuples/lists) of pytrees with equal structures, shapes and
    dtypes. Raises TypeError/ValueError when they differ.
    """
    if not isinstance(primals, tuple | list) or not isinstance(tangents, tuple | list):
        raise TypeError("jvp: primals and tangents must be tuples or lists")
    flat, in_tree = tree_flatten(list(primals))
    names = _arg_names(f, len(primals))
    leaf_names = [n for p, nm in zip(primals, names, strict=True) for n in _leaf_names(p, nm)]
    _check_float_inputs(flat, leaf_names, "jvp")
    tflat = _check_tangents(flat, in_tree, tangents, leaf_names, "jvp")
    scope = _Scope(flat, tflat)
    xs = scope.enter_inputs(flat, leaf_names)
    start = len(scope.trace.eqns)
    with trace_context(scope.trace):
        res = f(*tree_unflatten(in_tree, xs))
        out, aux = res if has_aux else (res, None)
        out_leaves, out_tree = tree_flatten(out)
        out_tr = [scope.trace.lift(o) for o in out_leaves]
        end = len(scope.trace.eqns)
        ts = [lax.convert_element_type(scope.trace.lift(_as_array_like(t, n)), x.dtype)
              for t, x, n in zip(tflat, xs, leaf_names, strict=True)]
        tan = forward_pass(scope.trace, start, end, [x._var for x in xs], ts)
        t_out = [tan.get(id(o._var)) if id(o._var) in tan else _zeros_like(o) for o in out_tr]
    primal_out = scope.export(tree_unflatten(out_tree, out_tr))
    tangent_out = scope.export(tree_unflatten(out_tree, t_out))
    if has_aux:
        return primal_out, tangent_out, scope.export(aux)
    return primal_out, tangent_out



def linearize(f: Callable, *primals, has_aux: bool = False):
    """Returns `(f(*primals), f_jvp)` (and `aux` with has_aux), where `f_jvp(*tangents)` is
    the linear map t -> J·t of f at `primals` (jax.linearize).

    f is evaluated once, here; each call of f_jvp evaluates only the tangent equations, whose
    rules read the recorded forward values (JAX's residuals). So linearize pays for itself over
    `jvp` when the same point is pushed forward several times (columns of a Jacobian, a Newton
    solver's Krylov iterations). f_jvp takes one tangent pytree per primal, with the primal's
    structure, shapes and dtypes, and returns the tangent of f's output (its structure).
    Like vjp's pullback, an f_jvp made inside `jit` must be called inside that same function.
    Raises TypeError for integer/bool primals or mismatched tangent dtypes, ValueError for
    mismatched tangent structures or shapes, UnexpectedTracerError for an f_jvp whose jit trace
    has finished.
    """
    names = _arg_names(f, len(primals))
    flat, in_tree = tree_flatten(list(primals))
    leaf_names = [n for p, nm in zip(primals, names, strict=True) for n in _leaf_names(p, nm)]
    _check_float_inputs(flat, leaf_names, "linearize")
    scope = _Scope(flat)
    xs = scope.enter_inputs(flat, leaf_names)
    start = len(scope.trace.eqns)
    with trace_context(scope.trace):
        res = f(*tree_unflatten(in_tree, xs))
        out, aux = res if has_aux else (res, None)
        out_leaves, out_tree = tree_flatten(out)
        out_tr = [scope.trace.lift(o) for o in out_leaves]
    end = len(scope.trace.eqns)

    def f_jvp(*tangents):
        if len(tangents) != len(primals):
            raise TypeError(f"linearize's f_jvp takes {len(primals)} tangent(s), one per "
                            f"primal, got {len(tangents)}{_where()}")
        tflat = _check_tangents(xs, in_tree, tangents, leaf_names, "linearize's f_jvp")
        here = current_trace()
        target = scope.trace if here is None or here is scope.trace else here
        if not scope.trace.active:
            raise UnexpectedTracerError(
                "linearize's f_jvp: it was made inside a jit (or vmap) trace that has "
                "finished; its forward values no longer exist. Call it inside that function, "
                f"or return what it computes from there{_where()}")
        with trace_context(target):
            ts = [lax.convert_element_type(target.lift(_as_array_like(t, n)), x.dtype)
                  for t, x, n in zip(tflat, xs, leaf_names, strict=True)]
            tan = forward_pass(target, start, end, [x._var for x in xs], ts, source=scope.trace)
            t_out = []
            for o in out_tr:
                t = tan.get(id(o._var))
                t_out.append(_zeros_like(o) if t is None else t)
        t_tree = tree_unflatten(out_tree, t_out)
        return t_tree if target is not scope.trace else scope.export(t_tree)

    primal_out = scope.export(tree_unflatten(out_tree, out_tr))
    if has_aux:
        return primal_out, f_jvp, scope.export(aux)
    return primal_out, f_jvp


def linear_transpose(f: Callable, *primals, reduce_axes=()):
    """The transpose of the linear function f (jax.linear_transpose): returns `f_t` with
    `f_t(ct) == (A^T ct,)` for f(x) = A x, one cotangent pytree per primal, in a tuple.

    primals: arrays or ShapeDtypeStructs (pytrees of them) fixing f's input shapes and dtypes
    (float dtypes only); their values are not read. f must be linear in its inputs: Nova
    transposes it through its VJP at zero inputs, which equals the transpose exactly when f
    is linear. An f with f(0) != 0 (affine, not linear) raises ValueError when f_t is made
    outside `jit` (where f(0) is known); other non-linear f are not detected. f_t takes a
    cotangent with f's output structure and shapes (ValueError otherwise) and dtypes
    (TypeError otherwise).
    """
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes (named axes) is not supported")
    flat, in_tree = tree_flatten(list(primals))
    names = _arg_names(f, len(primals))
    leaf_names = [n for p, nm in zip(primals, names, strict=True) for n in _leaf_names(p, nm)]
    zeros = []
    for x, n in zip(flat, leaf_names, strict=True):
        d = getattr(x, "dtype", None)
        d = np.dtype(d) if d is not None else dtypes.dtype_of_value(x)
        if not dtypes.is_inexact(d):
            raise TypeError(f"linear_transpose: argument '{n}' has dtype {d}; a linear "
                            f"function's inputs must be floating point{_where()}")
        zeros.append(np.zeros(tuple(np.shape(x)), d))
    out, pullback = vjp(f, *tree_unflatten(in_tree, zeros))
    for o in tree_leaves(out):
        if not isinstance(o, Tracer) and np.any(np.asarray(o) != 0):
            raise ValueError("linear_transpose: f(0) is not 0, so f is not linear (an affine "
                             f"function has no transpose){_where()}")
    out_dtypes = [np.dtype(o.dtype) for o in tree_leaves(out)]

    def f_t(ct):
        for i, (c, d) in enumerate(zip(tree_leaves(ct), out_dtypes, strict=False)):
            got = getattr(c, "dtype", None)  # (a Python scalar takes the output's dtype)
            if got is not None and np.dtype(got) != d:
                raise TypeError(f"linear_transpose: cotangent leaf {i} has dtype "
                                f"{np.dtype(got)}, but f's output leaf {i} has dtype {d}"
                                f"{_where()}")
        return pullback(ct)

    return f_t


def jacobian(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """jax.jacobian: the same as `jacrev` (reverse mode, one pullback per output element)."""
    return jacrev(f, argnums, has_aux)



# --- Jacobians and Hessians (jax.jacrev / jacfwd / hessian) -------------------------------------


def _check_argnums(argnums, n: int, what: str) -> tuple[int, ...]:
    try:
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    except TypeError:
        nums = (argnums,)
    for i in nums:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"{what}: argnums must be an int or a sequence of ints, got {argnums!r}")
        if not -n <= i < n:
            raise ValueError(f"{what}: argnums {argnums} refers to argument {i}, but only {n} "
                             f"positional arguments were given{_where()}")
    return nums


def _differentiated(f, args, argnums, what: str):
    """(argnums as a tuple, the differentiated arguments, their leaves, their structure),
    after checking argnums and that every leaf is a float."""
    nums = _check_argnums(argnums, len(args), what)
    dyn = [args[i] for i in nums]
    names = _arg_names(f, len(args))
    flat, in_tree = tree_flatten(dyn)
    _check_float_inputs(flat, [n for i in nums for n in _leaf_names(args[i], names[i])], what)
    return nums, dyn, flat, in_tree


def _array_or_scalar(x, message: Callable[[], str]) -> Array:
    """x as an Array when it is one, a NumPy value or a Python scalar; else TypeError with
    message() (the transform's own words)."""
    if isinstance(x, Array):
        return x
    if isinstance(x, np.ndarray | np.generic | int | float | bool | complex):
        return Array(np.asarray(x, dtype=dtypes.dtype_of_value(x)))
    raise TypeError(message())


def _std_basis(leaves, total: int) -> list[np.ndarray]:
    """Rows of the (total, total) identity split into one array per leaf: leaf k's has shape
    (total,) + leaf.shape and its leaf's dtype (the unit vectors JAX's jacobians map over)."""
    out, off = [], 0
    for leaf in leaves:
        shape = tuple(np.shape(leaf))
        n = int(np.prod(shape, dtype=np.int64))
        d = np.dtype(getattr(leaf, "dtype", None) or dtypes.dtype_of_value(leaf))
        out.append(np.ascontiguousarray(np.eye(total, dtype=d)[:, off:off + n]).reshape((total,) + shape))
        off += n
    return out


def _partial(f, args, kwargs, nums):
    """f as a function of args[nums] only, the other arguments fixed."""
    def fixed(*dyn):
        new = list(args)
        for i, d in zip(nums, dyn, strict=True):
            new[i] = d
        return f(*new, **kwargs)
    return fixed


def _size(x) -> int:
    return int(np.prod(np.shape(x), dtype=np.int64))


def jacrev(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """The Jacobian of f by reverse mode: one vjp, its pullback mapped (vmap) over the unit
    cotangents, as `jax.jacrev`; best when f has fewer outputs than inputs.

    `jacrev(f)(*args)` has f's output structure; each output leaf of shape O holds, for
    argnums an int, a pytree of args[argnums]'s structure whose leaf of shape I is the
    (O + I)-shaped array d out / d in (a tuple of such pytrees when argnums is a sequence).
    dtypes: the output's. With has_aux=True f returns `(out, aux)` and the result is
    `(jacobian, aux)`. Raises TypeError for integer or bool differentiated arguments or
    outputs, ValueError for argnums out of range.
    """
    def jac(*args, **kwargs):
        nums, dyn, _, in_tree = _differentiated(f, args, argnums, "jacrev")
        res = vjp(_partial(f, args, kwargs, nums), *dyn, has_aux=has_aux)
        y, pullback = res[0], res[1]
        y_leaves, y_tree = tree_flatten(y)
        for o in y_leaves:
            d = np.dtype(getattr(o, "dtype", None) or dtypes.dtype_of_value(o))
            if not dtypes.is_float(d):
                raise TypeError(f"jacrev requires floating-point outputs, but "
                                f"{getattr(f, '__name__', 'f')} returned dtype {d}{_where()}")
        total = sum(_size(o) for o in y_leaves)
        from nova.batching import vmap

        rows = vmap(pullback)(tree_unflatten(y_tree, _std_basis(y_leaves, total)))
        row_leaves = tree_flatten(list(rows))[0]  # one per differentiated leaf, (total,) + I
        per_out, off = [], 0
        for o in y_leaves:
            n, o_shape = _size(o), tuple(np.shape(o))
            blocks = [r[off:off + n].reshape(o_shape + tuple(r.shape[1:])) for r in row_leaves]
            per_in = tree_unflatten(in_tree, blocks)
            per_out.append(per_in[0] if isinstance(argnums, int) else tuple(per_in))
            off += n
        out = tree_unflatten(y_tree, per_out)
        return (out, res[2]) if has_aux else out

    jac.__name__ = f"jacrev({getattr(f, '__name__', 'f')})"
    jac.__wrapped__ = f
    return jac


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """The Jacobian of f by forward mode: jvp mapped (vmap) over the unit tangents, as
    `jax.jacfwd`; best when f has more outputs than inputs.

    Shapes, structure, has_aux and errors as for `jacrev` (for an output of shape O and an
    argument leaf of shape I the block has shape O + I); dtypes: the output's. Integer or bool
    outputs are allowed, as in JAX (their blocks are zeros); differentiated arguments must be
    floats.
    """
    def jac(*args, **kwargs):
        nums, dyn, flat, in_tree = _differentiated(f, args, argnums, "jacfwd")
        total = sum(_size(x) for x in flat)
        fixed = _partial(f, args, kwargs, nums)

        def push(basis_leaves):
            return jvp(fixed, dyn, tree_unflatten(in_tree, basis_leaves), has_aux=has_aux)

        from nova.batching import vmap

        out_axes = (None, 0, None) if has_aux else (None, 0)
        res = vmap(push, out_axes=out_axes)(_std_basis(flat, total))
        y_leaves, y_tree = tree_flatten(res[0])
        t_leaves = tree_flatten(res[1])[0]  # one per output leaf, (total,) + O
        per_out = []
        for o, t in zip(y_leaves, t_leaves, strict=True):
            o_shape = tuple(np.shape(o))
            t2 = t.reshape((total, _size(o)))
            blocks, off = [], 0
            for x in flat:
                n = _size(x)
                blocks.append(t2[off:off + n].T.reshape(o_shape + tuple(np.shape(x))))
                off += n
            per_in = tree_unflatten(in_tree, blocks)
            per_out.append(per_in[0] if isinstance(argnums, int) else tuple(per_in))
        out = tree_unflatten(y_tree, per_out)
        return (out, res[2]) if has_aux else out

    jac.__name__ = f"jacfwd({getattr(f, '__name__', 'f')})"
    jac.__wrapped__ = f
    return jac


def hessian(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """The Hessian of a scalar f: `jacfwd(jacrev(f))` (forward over reverse), as `jax.hessian`.

    For an argument leaf of shape I the block has shape I + I (pairs of leaves: I_a + I_b,
    nested by argnums twice when it is a sequence). Errors as for `jacrev`.
    """
    h = jacfwd(jacrev(f, argnums, has_aux), argnums, has_aux)
    h.__name__ = f"hessian({getattr(f, '__name__', 'f')})"
    return h
