"""Reductions: sum, max, min, prod over a static set of axes (removed); argmax, argmin over one."""

from __future__ import annotations

import numpy as np

from nova.core import dtypes
from nova.core.ir import TensorType
from nova.core.primitive import Cost, FusionKind, Primitive, Reduction, Template, lookup
from nova.ops import elementwise as ew
from nova.ops import structural as st


_NARROW_FLOATS = (np.dtype(np.float16), np.dtype(dtypes.bfloat16))


def _axes_rule(name):
    def rule(x, *, axes):
        for a in axes:
            if not 0 <= a < x.ndim:
                raise ValueError(f"{name}: axis {a} is out of bounds for an array of shape {x.shape}")
        if len(set(axes)) != len(axes):
            raise ValueError(f"{name}: repeated axis in {axes}")
        return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)

    return rule


def _kept_dims(ndim, axes):
    return tuple(i for i in range(ndim) if i not in axes)


def _expand_back(y, x_shape, axes):
    """Broadcasts a reduced value back to the operand's shape."""
    return st.broadcast_in_dim(y, x_shape, _kept_dims(len(x_shape), axes))


def _sum_vjp(ct, x, *, out, axes):
    return (_expand_back(ct, x.shape, axes),)


def _sum_jvp(t, x, *, out, axes):
    return reduce_sum(t[0], axes)


def _sum_impl(x, *, axes):
    return np.sum(x, axis=axes, dtype=x.dtype if x.dtype != np.bool_ else None)


reduce_sum_p = Primitive(
    "reduce_sum",
    shape_rule=_axes_rule("reduce_sum"),
    impl=_sum_impl,
    vjp=_sum_vjp,
    jvp=_sum_jvp,
    fusion=FusionKind.REDUCTION,
    kernel=Reduction(identity=lambda dtype: 0, combine=lambda b, acc, x: b.add(acc, x)),
    param_types={"axes": lambda a: tuple(sorted(int(i) for i in a))},
)


def _chooser_partial(x, out, axes):
    """Where x attains the extremum, 1 / (number of such places); elsewhere 0 (ties split)."""
    ob = _expand_back(out, x.shape, axes)
    hit = ew.convert_element_type(ew.eq(x, ob), x.dtype)
    count = _expand_back(reduce_sum(hit, axes), x.shape, axes)
    return ew.div(hit, count)


def _chooser_vjp(ct, x, *, out, axes):
    if not dtypes.is_inexact(x.dtype):
        return (None,)
    return (ew.mul(_expand_back(ct, x.shape, axes), _chooser_partial(x, out, axes)),)


def _chooser_jvp(t, x, *, out, axes):
    return reduce_sum(ew.mul(t[0], _chooser_partial(x, out, axes)), axes)


def _lowest(dtype):
    d = np.dtype(dtype)
    if d == dtypes.bool_:
        return False
    if dtypes.is_complex(d):  # the lexicographic order's bottom
        return complex(-np.inf, -np.inf)
    return -np.inf if dtypes.is_float(d) else np.iinfo(d).min


def _highest(dtype):
    d = np.dtype(dtype)
    if d == dtypes.bool_:
        return True
    if dtypes.is_complex(d):
        return complex(np.inf, np.inf)
    return np.inf if dtypes.is_float(d) else np.iinfo(d).max


def _max_impl(x, *, axes):
    if x.size == 0:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return np.full(shape, _lowest(x.dtype), x.dtype)
    return np.max(x, axis=axes)


def _min_impl(x, *, axes):
    if x.size == 0:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return np.full(shape, _highest(x.dtype), x.dtype)
    return np.min(x, axis=axes)


reduce_max_p = Primitive(
    "reduce_max",
    shape_rule=_axes_rule("reduce_max"),
    impl=_max_impl,
    vjp=_chooser_vjp,
    jvp=_chooser_jvp,
    fusion=FusionKind.REDUCTION,
    kernel=Reduction(identity=_lowest, combine=lambda b, acc, x: b.max(acc, x)),
    param_types={"axes": lambda a: tuple(sorted(int(i) for i in a))},
)

reduce_min_p = Primitive(
    "reduce_min",
    shape_rule=_axes_rule("reduce_min"),
    impl=_min_impl,
    vjp=_chooser_vjp,
    jvp=_chooser_jvp,
    fusion=FusionKind.REDUCTION,
    kernel=Reduction(identity=_highest, combine=lambda b, acc, x: b.min(acc, x)),
    param_types={"axes": lambda a: tuple(sorted(int(i) for i in a))},
)


def reduce_sum(x, axes):
    """Sum over `axes`. float16/bfloat16 values accumulate in float32 and round once, as
    nova.numpy.sum and XLA do: every VJP that sums a cotangent (a broadcast's, a bias's)
    comes here, and a bfloat16 running sum over 8192 rows is ~10 % off (the primitive itself
    sums in its element type)."""
    axes = tuple(sorted(int(a) for a in axes))
    if not axes:
        return x
    if x.dtype in _NARROW_FLOATS:
        wide = reduce_sum_p.bind(ew.convert_element_type(x, np.float32), axes=axes)
        return ew.convert_element_type(wide, x.dtype)
    return reduce_sum_p.bind(x, axes=axes)


def reduce_max(x, axes):
    axes = tuple(sorted(int(a) for a in axes))
    return reduce_max_p.bind(x, axes=axes) if axes else x


def reduce_min(x, axes):
    axes = tuple(sorted(int(a) for a in axes))
    return reduce_min_p.bind(x, axes=axes) if axes else x


# --- reduce_prod ----------------------------------------------------------------------------------


def _prod_impl(x, *, axes):
    return np.prod(x, axis=axes, dtype=x.dtype)


def _prod_partial(x, axes):
    """d prod / d x_i = the product of the other elements, exact where x holds zeros.

    With Z the zeros of a row: off Z it is prod(x off Z) / x_i * prod(x on Z); on Z it is
    prod(x off Z) times the product of the other zeros: 1 if Z = {i}, the other zero if |Z| = 2
    (written as sum(x on Z) - x_i), else 0. The zeros enter as traced values, not constants, so
    the rule's own derivative (the Hessian) is exact too. Division only sees nonzero divisors.
    """
    zero = ew.eq(x, ew.zeros_like(x))
    one, nil = ew.full_like(x, 1), ew.zeros_like(x)
    x1 = ew.select(zero, one, x)

    def whole_row(y):
        return _expand_back(y, x.shape, axes)

    nonzero_prod = whole_row(reduce_prod(x1, axes))
    zeros_prod = whole_row(reduce_prod(ew.select(zero, x, one), axes))
    zeros_sum = whole_row(reduce_sum(ew.select(zero, x, nil), axes))
    n_zeros = whole_row(reduce_sum(ew.convert_element_type(zero, dtypes.int32), axes))
    off_zeros = ew.mul(ew.div(nonzero_prod, x1), zeros_prod)
    other_zeros = ew.select(
        ew.eq(n_zeros, ew.full_like(n_zeros, 1)),
        one,
        ew.select(ew.eq(n_zeros, ew.full_like(n_zeros, 2)), ew.sub(zeros_sum, x), nil),
    )
    return ew.select(zero, ew.mul(nonzero_prod, other_zeros), off_zeros)


def _prod_vjp(ct, x, *, out, axes):
    if not dtypes.is_inexact(x.dtype):
        return (None,)
    # Zero-safe: a zero cotangent stays zero where the partial overflowed to inf.
    return (ew._zero_safe_mul(_expand_back(ct, x.shape, axes), _prod_partial(x, axes)),)


def _prod_jvp(t, x, *, out, axes):
    return reduce_sum(ew._zero_safe_mul(t[0], _prod_partial(x, axes)), axes)


reduce_prod_p = Primitive(
    "reduce_prod",
    shape_rule=_axes_rule("reduce_prod"),
    impl=_prod_impl,
    vjp=_prod_vjp,
    jvp=_prod_jvp,
    fusion=FusionKind.REDUCTION,
    kernel=Reduction(identity=lambda dtype: 1, combine=lambda b, acc, x: b.mul(acc, x)),
    param_types={"axes": lambda a: tuple(sorted(int(i) for i in a))},
)


def reduce_prod(x, axes):
    axes = tuple(sorted(int(a) for a in axes))
    return reduce_prod_p.bind(x, axes=axes) if axes else x


# --- argmax / argmin ------------------------------------------------------------------------------
# An index-valued reduction over one axis. Its accumulator is a (value, index) pair, which the
# single-accumulator Reduction hook cannot express, so codegen builds it from the "argreduce"
# template (the primitive's name says which comparison).


def _arg_rule(name):
    def rule(x, *, axis, index_dtype):
        if not 0 <= axis < x.ndim:
            raise ValueError(
                f"{name}: axis {axis} is out of bounds for an array of shape {x.shape}"
            )
        if x.shape[axis] == 0:
            raise ValueError(
                f"{name}: attempt to get {name} of an empty sequence (axis {axis} of shape "
                f"{x.shape} has size 0)"
            )
        if not dtypes.is_int(index_dtype):
            raise TypeError(f"{name}: index_dtype must be an integer dtype, got {index_dtype}")
        return TensorType(x.shape[:axis] + x.shape[axis + 1 :], index_dtype)

    return rule


def _arg_impl(np_fn):
    def impl(x, *, axis, index_dtype):
        if dtypes.is_float(x.dtype) and x.dtype.itemsize < 4:
            x = x.astype(np.float32)  # exact; NumPy's NaN rules hold for float32
        # NumPy's rules: ties give the first index, and the first NaN wins over any number.
        return np_fn(x, axis=axis).astype(index_dtype)

    return impl


def _arg_cost(in_types, out_types, **params):
    (x,) = in_types
    return Cost(x.size, x.nbytes + sum(t.nbytes for t in out_types))


def _arg_primitive(name, np_fn):
    return Primitive(
        name,
        shape_rule=_arg_rule(name),
        impl=_arg_impl(np_fn),
        vjp=lambda ct, x, *, out, **params: (None,),
        jvp=lambda t, x, *, out, **params: ew.zeros_like(out),
        fusion=FusionKind.OPAQUE,
        kernel=Template("argreduce"),
        cost=_arg_cost,
        differentiable=False,
        param_types={"axis": int, "index_dtype": dtypes.canonicalize},
        batch=lambda args, batched, *, axis, index_dtype: lookup(name).bind(
            args[0], axis=axis + 1, index_dtype=index_dtype),
    )


argmax_p = _arg_primitive("argmax", np.argmax)
argmin_p = _arg_primitive("argmin", np.argmin)


def argmax(x, axis, index_dtype=dtypes.int32):
    """Index of the first maximum along `axis` (the first NaN, if any) as `index_dtype`."""
    return argmax_p.bind(x, axis=int(axis), index_dtype=dtypes.canonicalize(index_dtype))


def argmin(x, axis, index_dtype=dtypes.int32):
    """Index of the first minimum along `axis` (the first NaN, if any) as `index_dtype`."""
    return argmin_p.bind(x, axis=int(axis), index_dtype=dtypes.canonicalize(index_dtype))
