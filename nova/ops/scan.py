"""Cumulative (scan) primitives along one axis: cumsum, cumprod, cummax, cummin (as lax's).

Params: `axis` (non-negative int) and `reverse` (bool: accumulate from the end). Outputs have the
operand's shape and dtype; element j combines elements 0..j (or j..n-1 when reversed). Codegen
builds them from the "scan" template (the primitive's name gives the combiner).
"""

from __future__ import annotations

import numpy as np

from nova.core import dtypes
from nova.core.ir import TensorType
from nova.core.primitive import Cost, FusionKind, Primitive, Template, lookup
from nova.ops import elementwise as ew
from nova.ops import structural as st
from nova.ops.sort import sort_p


def scan_identity(name: str, dtype):
    """The running value of scan `name` (cumsum/cumprod/cummax/cummin) before the first element:
    combining it with any x gives x exactly (-0.0 for float sums keeps a leading -0.0). Kernel
    generators start their accumulators from it."""
    d = np.dtype(dtype)
    if name == "cumsum":
        return -0.0 if dtypes.is_float(d) else 0
    if name == "cumprod":
        return 1
    lowest = name == "cummax"
    if d == dtypes.bool_:
        return not lowest
    if dtypes.is_float(d):
        return -np.inf if lowest else np.inf
    return int(np.iinfo(d).min if lowest else np.iinfo(d).max)


def _scan_rule(name, *, allow_bool):
    def rule(x, *, axis, reverse):
        if not 0 <= axis < x.ndim:
            raise ValueError(
                f"{name}: axis {axis} is out of bounds for an array of shape {x.shape}"
            )
        if dtypes.is_bool(x.dtype) and not allow_bool:
            raise TypeError(f"{name}: bool operands are not supported; convert to an integer dtype")
        return TensorType(x.shape, x.dtype)

    return rule


def _scan_impl(ufunc):
    def impl(x, *, axis, reverse):
        dt = x.dtype
        if dtypes.is_float(dt) and dt.itemsize < 4:
            x = x.astype(np.float32)  # accumulate half precision in float32, as the kernels do
        if reverse:
            x = np.flip(x, axis)
        y = ufunc.accumulate(x, axis=axis, dtype=x.dtype)
        if reverse:
            y = np.flip(y, axis)
        return y.astype(dt)

    return impl


def _scan_cost(in_types, out_types, **params):
    (x,) = in_types
    return Cost(x.size, x.nbytes + out_types[0].nbytes)


def _scan_primitive(name, ufunc, vjp, jvp, *, allow_bool=False):
    return Primitive(
        name,
        shape_rule=_scan_rule(name, allow_bool=allow_bool),
        impl=_scan_impl(ufunc),
        vjp=vjp,
        jvp=jvp,
        fusion=FusionKind.OPAQUE,
        kernel=Template("scan"),
        cost=_scan_cost,
        param_types={"axis": int, "reverse": bool},
        batch=lambda args, batched, *, axis, reverse: lookup(name).bind(
            args[0], axis=axis + 1, reverse=reverse),
    )


def _i32(b):
    return ew.convert_element_type(b, dtypes.int32)


def _iota(x, axis):
    return st.iota(dtypes.int32, x.shape, axis)


# --- cumsum: the VJP is a cumsum running the other way --------------------------------------------


def _cumsum_vjp(ct, x, *, out, axis, reverse):
    return (cumsum(ct, axis, not reverse),)


def _cumsum_jvp(t, x, *, out, axis, reverse):
    return cumsum(t[0], axis, reverse)


cumsum_p = _scan_primitive("cumsum", np.add, _cumsum_vjp, _cumsum_jvp)

# --- cumprod -------------------------------------------------------------------------------------
# d out_j / d x_i = prod_{k <= j, k != i} x_k for i <= j. With z the first zero of the row (in scan
# order): for i < z that is out_j / x_i (x_i != 0; out_j carries x_z for j >= z); for i = z it is
# the scan of x with x_z replaced by 1; for i > z it is x_z times the same rule applied to that
# scan. x_z stays a traced factor there (its value is 0), so the rule's own derivative is exact
# as well. Division only ever sees nonzero divisors.


def _cumprod_parts(x, axis, reverse):
    zero = ew.eq(x, ew.zeros_like(x))
    zeros_so_far = cumsum(_i32(zero), axis, reverse)
    before = ew.eq(zeros_so_far, ew.zeros_like(zeros_so_far))
    first = ew.bitwise_and(zero, ew.eq(zeros_so_far, ew.full_like(zeros_so_far, 1)))
    x_without_first = ew.select(first, ew.full_like(x, 1), x)
    without_first = cumprod(x_without_first, axis, reverse)
    x_safe = ew.select(before, x, ew.full_like(x, 1))
    return before, first, x_without_first, without_first, x_safe


def _cumprod_grad(ct, x, out, axis, reverse, *, exact_after_zero):
    before, first, x_wo, without_first, x_safe = _cumprod_parts(x, axis, reverse)
    mul = ew._zero_safe_mul  # a zero cotangent stays zero even where out overflowed
    before_z = ew.div(cumsum(mul(ct, out), axis, not reverse), x_safe)
    at_z = cumsum(mul(ct, without_first), axis, not reverse)
    if exact_after_zero:
        x_z = cumsum(ew.select(first, x, ew.zeros_like(x)), axis, reverse)  # 0, but traced
        after_z = ew.mul(x_z, _cumprod_grad(ct, x_wo, without_first, axis, reverse,
                                            exact_after_zero=False))
    else:
        after_z = ew.zeros_like(x)
    return ew.select(before, before_z, ew.select(first, at_z, after_z))


def _cumprod_vjp(ct, x, *, out, axis, reverse):
    if not dtypes.is_inexact(x.dtype):
        return (None,)
    return (_cumprod_grad(ct, x, out, axis, reverse, exact_after_zero=True),)


def _cumprod_tangent(t, x, out, axis, reverse, *, exact_after_zero):
    before, first, x_wo, without_first, x_safe = _cumprod_parts(x, axis, reverse)
    before_z = ew.mul(out, cumsum(ew.div(t, x_safe), axis, reverse))
    t_z = cumsum(ew.select(first, t, ew.zeros_like(t)), axis, reverse)
    after_z = ew.mul(t_z, without_first)
    if exact_after_zero:
        x_z = cumsum(ew.select(first, x, ew.zeros_like(x)), axis, reverse)  # 0, but traced
        t_wo = ew.select(first, ew.zeros_like(t), t)
        rest = _cumprod_tangent(t_wo, x_wo, without_first, axis, reverse, exact_after_zero=False)
        after_z = ew.add(after_z, ew.mul(x_z, rest))
    return ew.select(before, before_z, after_z)


def _cumprod_jvp(t, x, *, out, axis, reverse):
    return _cumprod_tangent(t[0], x, out, axis, reverse, exact_after_zero=True)


cumprod_p = _scan_primitive("cumprod", np.multiply, _cumprod_vjp, _cumprod_jvp)

# --- cummax / cummin -----------------------------------------------------------------------------
# out_j = x_{owner(j)}: owner(j) is the position nearest to j, at or before it in scan order, where
# x attains the running extremum (x_k == out_k; NaN counts as attaining it), so a tie gives the
# cotangent to the later position. Owners are monotone, so each owner k holds one contiguous block
# of j, and x_k's cotangent is the sum of ct over that block: C(far end) - C(k) + ct(k) with C the
# cumsum of ct in scan order. A stable sort keyed by (owner, descending position) reverses every
# block in place, which brings C at the block's far end to the owner's position. C is accumulated
# in float64 (float32 for 16-bit operands) since the difference of prefix sums cancels on long rows.


def _chosen_vjp(ct, x, *, out, axis, reverse):
    if not dtypes.is_float(x.dtype):
        return (None,)
    hit = ew.bitwise_or(ew.eq(x, out), ew.isnan(x))
    pos = _iota(x, axis)
    n = x.shape[axis]
    if reverse:  # the nearest hit at or after j
        owner = cummin(ew.select(hit, pos, ew.full_like(pos, n)), axis, reverse=True)
    else:  # the nearest hit at or before j
        owner = cummax(ew.select(hit, pos, ew.full_like(pos, -1)), axis)
    wide = dtypes.float64 if x.dtype.itemsize >= 4 else dtypes.float32
    ct_w = ew.convert_element_type(ct, wide)
    c = cumsum(ct_w, axis, reverse)
    descending = ew.sub(ew.full_like(pos, n - 1), pos)
    far_end_c = sort_p.bind(owner, descending, c, dimension=axis, num_keys=2)[2]
    g = ew.convert_element_type(ew.add(ew.sub(far_end_c, c), ct_w), x.dtype)
    return (ew.select(hit, g, ew.zeros_like(g)),)


cummax_p = _scan_primitive("cummax", np.maximum, _chosen_vjp, None, allow_bool=True)
cummin_p = _scan_primitive("cummin", np.minimum, _chosen_vjp, None, allow_bool=True)

# --- bind wrappers -------------------------------------------------------------------------------


def _scan(p, x, axis, reverse):
    ndim = x.ndim
    if not -ndim <= axis < ndim:
        raise ValueError(f"{p.name}: axis {axis} is out of bounds for an array of shape {x.shape}")
    return p.bind(x, axis=int(axis) % ndim, reverse=bool(reverse))


def cumsum(x, axis=0, reverse=False):
    return _scan(cumsum_p, x, axis, reverse)


def cumprod(x, axis=0, reverse=False):
    return _scan(cumprod_p, x, axis, reverse)


def cummax(x, axis=0, reverse=False):
    return _scan(cummax_p, x, axis, reverse)


def cummin(x, axis=0, reverse=False):
    return _scan(cummin_p, x, axis, reverse)
