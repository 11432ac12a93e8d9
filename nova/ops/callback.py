"""Host callbacks: Python functions called from inside traced programs (jax.pure_callback,
jax.experimental.io_callback, jax.debug.callback / jax.debug.print).

Two primitives, both run on the host by their reference (a `host:` kernel of the executable,
between the generated kernels; eagerly, at once):

- `pure_callback`: a function of its arguments only. The passes may drop it when its results
  are unused and merge two equal calls, as for any primitive.
- `io_callback`: a call for its effect (printing, logging, I/O), with or without results. It is
  *effectful* (Primitive.effectful): dead-code elimination keeps it although nothing reads its
  results, and common-subexpression elimination never merges two calls. Its first output is a
  dummy int32 token, so that every equation has an output. Calls run in program order.

Neither is differentiable: a derivative reaching a callback's results raises TypeError (JAX
raises too); give the function a rule with nova.custom_jvp / custom_vjp. An io_callback whose
results are not differentiated (debug.print of a value being differentiated) is no obstacle.

Inside lax.scan / while_loop / cond bodies an io_callback runs once per iteration (per taken
branch); a loop or cond holding one is an effect too (`has_effects`). The copies of a body
that derivative rules build leave the effects out (control_flow.py `inline(effects=False)`),
so differentiating prints once, as the primal does; a nova.checkpoint function's recomputation
in the backward does run them again (as jax.checkpoint does). A program holding a callback is
not kept in the on-disk executable cache (a Python function cannot be stored), only in memory.
"""

from __future__ import annotations

import itertools

import numpy as np

from nova.core import dtypes
from nova.core.ir import TensorType
from nova.core.primitive import Cost, FusionKind, Primitive, Template, makes_effects

TOKEN = TensorType((), np.dtype(np.int32))


class HostCallback:
    """A Python function held as a primitive's parameter. Equal only to itself (two wrappers
    of one function are two callbacks), hashable, printed in the IR as a string attribute
    with its serial number (unique in the process) and the function's name; such a Program
    cannot be parsed back into a runnable one."""

    __slots__ = ("fn", "name", "serial")
    _serials = itertools.count()

    def __init__(self, fn, name: str | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__qualname__", None) or type(fn).__name__
        self.serial = next(HostCallback._serials)

    @property
    def ir_attr(self) -> str:
        return f"callback #{self.serial}: {self.name}"

    def __repr__(self):
        return f"<callback #{self.serial} {self.name}>"


def _kind(dtype) -> str:
    d = np.dtype(dtype)
    if dtypes.is_float(d):
        return "float"
    return "bool" if d == np.bool_ else ("uint" if d.kind == "u" else "int")


def _check_results(name: str, got, result_types) -> list:
    """The callback's results as arrays of the declared types (flattened as declared)."""
    from nova.core.pytree import tree_leaves

    leaves = tree_leaves(got)
    if len(leaves) != len(result_types):
        raise TypeError(f"{name}: the callback returned {len(leaves)} array(s), but "
                        f"result_shape_dtypes declares {len(result_types)}")
    out = []
    for i, (x, t) in enumerate(zip(leaves, result_types, strict=True)):
        a = np.asarray(x)
        if a.shape != t.shape:
            raise ValueError(f"{name}: result {i} of the callback has shape {a.shape}, but "
                             f"result_shape_dtypes declares {t.shape}")
        if a.dtype != t.dtype:
            if _kind(a.dtype) != _kind(t.dtype):  # float64 -> float32 casts; int -> float not
                raise TypeError(f"{name}: result {i} of the callback has dtype {a.dtype}, "
                                f"but result_shape_dtypes declares {t.dtype}")
            a = a.astype(t.dtype)
        out.append(a)
    return out


def _not_differentiable(name: str):
    def rule(*args, **params):
        raise TypeError(
            f"{name} is not differentiable: Nova cannot see inside a Python callback. Give "
            "the function that calls it a derivative of its own with nova.custom_jvp or "
            "nova.custom_vjp")

    return rule


# --- pure_callback ------------------------------------------------------------------------------


def _host_args(args) -> list:
    """Read-only copies of the operands: the callback may keep them, and they may be views of
    a compiled program's buffers that are reused (or of a caller's immutable Array)."""
    out = []
    for a in args:
        c = np.array(a, copy=True)
        c.flags.writeable = False
        out.append(c)
    return out


def _pure_impl(*args, callback, result_types, vmap_method):
    return tuple(_check_results("pure_callback", callback.fn(*_host_args(args)), result_types))


def _sequential(callback: HostCallback, batched, size: int, result_types,
                leading: int = 0) -> HostCallback:
    """A callback applying `callback` to each batch element in turn and stacking the results
    (vmap_method 'sequential'). leading: arguments before the mapped ones (io_callback's token)
    passed through unchanged."""

    def each(*args):
        fixed, mapped = args[:leading], args[leading:]
        rows = []
        for i in range(size):
            row = callback.fn(*fixed, *[a[i] if b else a for a, b in zip(mapped, batched,
                                                                        strict=True)])
            rows.append(row)
        if not result_types:
            return ()
        if not rows:  # an empty batch: the callback is never called
            return tuple(np.zeros((0, *t.shape), t.dtype) for t in result_types)
        from nova.core.pytree import tree_leaves

        cols = [tree_leaves(r) for r in rows]
        return tuple(np.stack([np.asarray(c[k]) for c in cols]) for k in range(len(result_types)))

    return HostCallback(each, f"{callback.name} (sequential over {size})")


def _pure_batch(args, batched, *, callback, result_types, vmap_method):
    from nova.core.primitive import broadcast_batched

    size = next(a.shape[0] for a, b in zip(args, batched, strict=True) if b)
    types = tuple(TensorType((size, *t.shape), t.dtype) for t in result_types)
    if vmap_method in ("sequential", "sequential_unrolled"):
        fn = _sequential(callback, batched, size, result_types)
        return pure_callback_p.bind(*args, callback=fn, result_types=types,
                                    vmap_method=vmap_method)
    if vmap_method == "expand_dims":  # unbatched arguments get a leading axis of size 1
        from nova.ops import lax

        args = [a if b else lax.reshape(a, (1, *a.shape)) for a, b in zip(args, batched,
                                                                           strict=True)]
    elif vmap_method == "broadcast_all":
        args = broadcast_batched(args, batched, size)
    elif vmap_method != "legacy_vectorized":  # (that one: the arguments as they are)
        raise NotImplementedError(
            "pure_callback under vmap needs a vmap_method: 'sequential' (call once per batch "
            "element), 'expand_dims' or 'broadcast_all' (call once with the batch axis "
            "first, the callback handling it)")
    return pure_callback_p.bind(*args, callback=callback, result_types=types,
                                vmap_method=vmap_method)


def _callback_cost(ins, outs, **_):
    return Cost(0, sum(t.nbytes for t in ins) + sum(t.nbytes for t in outs))


pure_callback_p = Primitive(
    "pure_callback",
    shape_rule=lambda *ins, callback, result_types, vmap_method: tuple(result_types),
    impl=_pure_impl,
    vjp=_not_differentiable("pure_callback"),
    jvp=_not_differentiable("pure_callback"),
    fusion=FusionKind.OPAQUE,
    kernel=Template("host_callback"),
    cost=_callback_cost,
    multiple_results=True,
    batch=_pure_batch,
    param_types={"result_types": tuple},
)


# --- io_callback --------------------------------------------------------------------------------


def _io_impl(token, *args, callback, result_types):
    got = callback.fn(*_host_args(args))
    if not result_types:
        return (np.zeros((), np.int32),)
    return (np.zeros((), np.int32), *_check_results("io_callback", got, result_types))


def _io_jvp(tangents, token, *args, out, callback, result_types):
    if any(dtypes.is_float(t.dtype) for t in result_types):
        _not_differentiable("io_callback")()
    return tuple(np.zeros((), np.int32) if k == 0 else None for k in range(len(out)))


def _io_vjp(ct, token, *args, out, callback, result_types):
    if any(c is not None for c in ct[1:]):
        _not_differentiable("io_callback")()
    return (None,) * (1 + len(args))


def _io_batch(args, batched, *, callback, result_types):
    from nova.ops import lax

    size = next(a.shape[0] for a, b in zip(args, batched, strict=True) if b)
    fn = _sequential(callback, batched[1:], size, result_types)
    types = tuple(TensorType((size, *t.shape), t.dtype) for t in result_types)
    outs = io_callback_p.bind(lax.full((), 0, np.int32), *args[1:], callback=fn,
                              result_types=types)
    return (lax.broadcast_in_dim(outs[0], (size,), ()), *outs[1:])


io_callback_p = Primitive(
    "io_callback",
    shape_rule=lambda token, *ins, callback, result_types: (TOKEN, *result_types),
    impl=_io_impl,
    vjp=_io_vjp,
    jvp=_io_jvp,
    fusion=FusionKind.OPAQUE,
    kernel=Template("host_callback"),
    cost=_callback_cost,
    multiple_results=True,
    batch=_io_batch,
    param_types={"result_types": tuple},
    effectful=True,
)

CALLBACKS = frozenset({"pure_callback", "io_callback"})


def has_effects(e) -> bool:
    """Whether equation e is made for an effect: an io_callback, or a control-flow equation
    whose Regions hold one (dead-code elimination keeps it, cse never merges it)."""
    return makes_effects(e.prim, e.params)


def holds_callbacks(program) -> bool:
    """Whether the Program (its Regions included) calls a Python function."""
    for e in program.eqns:
        if e.prim.name in CALLBACKS:
            return True
        for v in e.params.values():
            for r in (v if isinstance(v, tuple) else (v,)):
                body = getattr(r, "program", None)
                if body is not None and holds_callbacks(body):
                    return True
    return False
