"""Reduction primitives over a static set of axes (the reduced axes are removed)."""

from __future__ import annotations

import numpy as np

from nova.core import dtypes
from nova.core.ir import TensorType
from nova.core.primitive import FusionKind, Primitive, Reduction
from nova.ops import elementwise as ew
from nova.ops import structural as st


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
    if not dtypes.is_float(x.dtype):
        return (None,)
    return (ew.mul(_expand_back(ct, x.shape, axes), _chooser_partial(x, out, axes)),)


def _chooser_jvp(t, x, *, out, axes):
    return reduce_sum(ew.mul(t[0], _chooser_partial(x, out, axes)), axes)


def _lowest(dtype):
    d = np.dtype(dtype)
    if d == dtypes.bool_:
        return False
    return -np.inf if dtypes.is_float(d) else np.iinfo(d).min


def _highest(dtype):
    d = np.dtype(dtype)
    if d == dtypes.bool_:
        return True
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
    axes = tuple(sorted(int(a) for a in axes))
    return reduce_sum_p.bind(x, axes=axes) if axes else x


def reduce_max(x, axes):
    axes = tuple(sorted(int(a) for a in axes))
    return reduce_max_p.bind(x, axes=axes) if axes else x


def reduce_min(x, axes):
    axes = tuple(sorted(int(a) for a in axes))
    return reduce_min_p.bind(x, axes=axes) if axes else x
