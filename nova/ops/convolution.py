"""Convolutions and window reductions, as jax.lax's, built on Nova's primitives.

`conv_general_dilated` lowers to im2col and one contraction: the padded (and, for a transposed
convolution, interior-padded) input, in (batch, features, spatial...) order, is cut into one
strided slice per kernel offset, the slices are stacked after the feature axis, and a batched
dot_general, per image and group (out features per group, in features per group x kernel
offsets) @ (that, output positions), produces the output in (batch, features, spatial...).
So every convolution runs on Nova's generated GEMM kernels, CPU and GPU alike, and reverse
mode, forward mode and vmap come from pad, slice, concatenate and dot_general's rules. The
stacked patches take kernel-size times the input's memory (a 3x3 convolution: 9x). The padded
input is a stored kernel of its own (its innermost axis padded to whole vector chunks), so that
the patches are plain vector copies of it (bench/conv.py's step: the fused, scalar patch
kernel took ~45 % of it).

`reduce_window` with lax.add, lax.max, lax.min or lax.mul folds the same strided slices
elementwise (pooling). A float max or min then routes each window's derivative to one element,
as XLA's select-and-scatter does: the first maximum in window order (the last NaN when the
window holds NaN), so tied inputs do not split the gradient.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Sequence

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.ops import elementwise as ew
from nova.ops import slicing as sl
from nova.ops import structural as st
from nova.ops.contraction import dot_general


def _array(x):
    from nova.numpy_impl.util import asarray

    return asarray(x)


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """(lhs_spec, rhs_spec, out_spec): each a tuple of axis positions, (batch or out feature,
    feature or in feature, spatial...), from None (NCHW... / OIHW... / NCHW...), a triple of
    layout strings such as ("NHWC", "HWIO", "NHWC"), or such a triple of position tuples, as
    jax.lax.conv_dimension_numbers. Raises ValueError for a malformed spec."""
    nd = len(lhs_shape)
    if len(rhs_shape) != nd:
        raise ShapeError(f"conv: lhs of shape {tuple(lhs_shape)} and rhs of shape "
                         f"{tuple(rhs_shape)} have different ranks")
    if dimension_numbers is None:
        iota = tuple(range(nd))
        return iota, iota, iota
    lhs, rhs, out = dimension_numbers
    if all(isinstance(s, str) for s in (lhs, rhs, out)):
        for name, s in (("lhs", lhs), ("rhs", rhs), ("out", out)):
            if len(s) != nd or len(set(s)) != nd:
                raise ValueError(f"conv: the {name} layout {s!r} must name {nd} distinct axes")
        spatial = [c for c in rhs if c not in "OI"]  # JAX orders spatial axes as the kernel does
        if "N" not in lhs or "C" not in lhs or "O" not in rhs or "I" not in rhs \
                or "N" not in out or "C" not in out:
            raise ValueError(f"conv: layouts {dimension_numbers} need N and C in lhs and out, "
                             "O and I in rhs")
        rhs_spatial = [c for c in rhs if c not in "OI"]
        out_spatial = [c for c in out if c not in "NC"]
        if sorted(rhs_spatial) != sorted(spatial) or sorted(out_spatial) != sorted(spatial):
            raise ValueError(f"conv: layouts {dimension_numbers} name different spatial axes")
        return (tuple([lhs.index("N"), lhs.index("C")] + [lhs.index(c) for c in spatial]),
                tuple([rhs.index("O"), rhs.index("I")] + [rhs.index(c) for c in spatial]),
                tuple([out.index("N"), out.index("C")] + [out.index(c) for c in spatial]))
    specs = tuple(tuple(int(i) for i in s) for s in (lhs, rhs, out))
    for s in specs:
        if sorted(s) != list(range(nd)):
            raise ValueError(f"conv: dimension numbers {dimension_numbers} must each be a "
                             f"permutation of range({nd})")
    return specs


def padtype_to_pads(in_shape, window_shape, window_strides, padding: str) -> list:
    """[(lo, hi)] per spatial axis for "VALID", "SAME" (output ceil(in / stride), the extra
    padding at the high end) or "SAME_LOWER" (at the low end), as jax.lax.padtype_to_pads."""
    mode = padding.upper()
    if mode == "VALID":
        return [(0, 0)] * len(in_shape)
    if mode not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"conv: unknown padding {padding!r} (VALID, SAME, SAME_LOWER, or a "
                         f"sequence of (low, high) pairs)")
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides, strict=True):
        out = -(-n // s)
        total = max((out - 1) * s + k - n, 0)
        lo = total // 2 if mode == "SAME" else total - total // 2
        pads.append((lo, total - lo))
    return pads


def _ints(name, v, n, default):
    if v is None:
        return (default,) * n
    v = tuple(operator.index(i) for i in v)
    if len(v) != n or any(i < 1 for i in v):
        raise ValueError(f"conv: {name} must be {n} positive ints, got {v}")
    return v


def _windows(x, window, strides, dilation, out_shape, lead: int = 0, trail: int = 0,
             shift=None):
    """The strided slices of x for every window offset, in row-major order of the offsets:
    x's first `lead` and last `trail` axes whole, the axes between windowed, each window
    starting `shift` (per windowed axis; default 0) further in."""
    nw = x.ndim - lead - trail
    shift = shift or [0] * nw
    whole_lo, whole_hi = list(x.shape[:lead]), list(x.shape[x.ndim - trail:])
    for offset in itertools.product(*(range(k) for k in window)):
        start = [o * d + t for o, d, t in zip(offset, dilation, shift, strict=True)]
        limit = [s + (n - 1) * t + 1 for s, n, t in zip(start, out_shape, strides, strict=True)]
        assert len(start) == nw
        yield sl.slice(x, [0] * lead + start + [0] * trail, whole_lo + limit + whole_hi,
                       [1] * lead + list(strides) + [1] * trail)


# The padded input is stored, not evaluated inside the windows' kernel (fusion's
# read_through_windows, nova/compiler/fusion_rules.py); padding the innermost axis to
# multiples of this many elements puts the pad's bounds between vector chunks, so that the
# pad kernel is vector code too (one AVX2 register of float32; AVX-512 hosts take 8 lanes).
_ALIGN = 8


def _aligned_padding(n: int, lo: int, hi: int, interior: int) -> tuple:
    """(extra low, extra high) zeros for the innermost spatial axis of n elements padded
    (lo, hi, interior): up to multiples of _ALIGN when n is one (the windows then start
    `extra low` further in), else none."""
    if interior or lo < 0 or hi < 0 or n % _ALIGN or (lo % _ALIGN == 0 and hi % _ALIGN == 0):
        return 0, 0
    return (-lo) % _ALIGN, (-hi) % _ALIGN


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """An N-d convolution (cross-correlation, as in deep learning: the kernel is not flipped),
    as jax.lax.conv_general_dilated.

    lhs: (batch, in features, spatial...) in the layout dimension_numbers gives; rhs: (out
    features, in features / feature_group_count, kernel spatial...); result: (batch, out
    features, output spatial...) in the out layout. window_strides: per spatial axis. padding:
    "VALID", "SAME", "SAME_LOWER" or (low, high) pairs (negative crops). lhs_dilation:
    interior zeros between input elements (a transposed convolution; string padding is refused
    then, as JAX does); rhs_dilation: atrous kernels. feature_group_count: grouped and
    depthwise convolutions. Output size per spatial axis: floor((padded input - dilated kernel)
    / stride) + 1 (0 when the kernel does not fit). Floats of one dtype; `precision` is
    accepted for compatibility (the config's matmul precision applies). Raises ShapeError /
    ValueError / TypeError naming the mismatch; NotImplementedError for batch_group_count > 1.
    """
    x, w = _array(lhs), _array(rhs)
    if x.dtype != w.dtype:
        raise TypeError(f"conv: lhs has dtype {x.dtype}, rhs {w.dtype} (they must match)")
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"conv: operands must be floats, got {x.dtype}")
    if x.ndim < 2:
        raise ShapeError(f"conv: lhs needs a batch and a feature axis, got shape {x.shape}")
    if batch_group_count != 1:
        raise NotImplementedError("conv: batch_group_count > 1 is not implemented")
    lspec, rspec, ospec = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    nsp = x.ndim - 2
    strides = _ints("window_strides", window_strides, nsp, 1)
    ldil = _ints("lhs_dilation", lhs_dilation, nsp, 1)
    rdil = _ints("rhs_dilation", rhs_dilation, nsp, 1)
    if preferred_element_type is not None:
        wide = dtypes.canonicalize(preferred_element_type)
        if dtypes.is_float(wide) and wide.itemsize > x.dtype.itemsize:
            # accumulate in the wider type: the GEMM's operands take it
            x, w = ew.convert_element_type(x, wide), ew.convert_element_type(w, wide)
    # canonical layouts: x (N, C, spatial...), w (O, I, kernel...)
    x = st.transpose(x, lspec)
    w = st.transpose(w, rspec)
    n, c = x.shape[0], x.shape[1]
    o, i_per = w.shape[0], w.shape[1]
    kernel = w.shape[2:]
    g = operator.index(feature_group_count)
    if g < 1 or c % g or o % g or c // g != i_per:
        raise ShapeError(f"conv: lhs has {c} features and rhs {i_per} per group for "
                         f"{o} outputs; with feature_group_count={g} these must be "
                         f"{c} = {g} x {i_per} and {o} divisible by {g}")
    eff_kernel = [(k - 1) * d + 1 for k, d in zip(kernel, rdil, strict=True)]
    if isinstance(padding, str):
        if any(d != 1 for d in ldil):
            raise ValueError("conv: string padding is not implemented for a transposed "
                             "convolution (lhs_dilation); give (low, high) pairs")
        pads = padtype_to_pads(x.shape[2:], eff_kernel, strides, padding)
    else:
        pads = [tuple(operator.index(p) for p in pair) for pair in padding]
        if len(pads) != nsp or any(len(p) != 2 for p in pads):
            raise ValueError(f"conv: padding must be {nsp} (low, high) pairs, got {padding}")
    config = [(0, 0, 0), (0, 0, 0)] + [(lo, hi, d - 1) for (lo, hi), d in
                                       zip(pads, ldil, strict=True)]
    grown = [(n - 1) * d + 1 + lo + hi if n else lo + hi for n, (lo, hi), d in
             zip(x.shape[2:], pads, ldil, strict=True)]
    out_sp = [max(0, (p - k) // s + 1) for p, k, s in
              zip(grown, eff_kernel, strides, strict=True)]
    extra_lo, extra_hi = _aligned_padding(x.shape[-1], *config[-1])
    config[-1] = (config[-1][0] + extra_lo, config[-1][1] + extra_hi, config[-1][2])
    x = sl.pad(x, np.zeros((), x.dtype), config)
    kk, npos = math.prod(kernel), math.prod(out_sp)
    if 0 in out_sp or n == 0 or o == 0 or kk == 0 or c == 0:
        out = st.full((n, o, *out_sp), 0, x.dtype)
    else:
        # One strided slice per kernel offset, each (N, C, output spatial...): copies along
        # the innermost spatial axis, stacked after C into (N, G, C/G x K, positions).
        cols = [st.reshape(p, (n, c, 1, npos))
                for p in _windows(x, kernel, strides, rdil, out_sp, lead=2,
                                  shift=[0] * (nsp - 1) + [extra_lo])]
        patches = cols[0] if len(cols) == 1 else sl.concatenate(cols, 2)
        patches = st.reshape(patches, (n, g, i_per * kk, npos))
        # Per image and group a GEMM (O/G, C/G x K) @ (C/G x K, positions): the kernel is
        # broadcast over the batch (its cotangent is the batch's sum).
        wk = st.reshape(w, (g, o // g, i_per * kk))
        wb = st.broadcast_in_dim(wk, (n, g, o // g, i_per * kk), (1, 2, 3))
        y = dot_general(wb, patches, (((3,), (2,)), ((0, 1), (0, 1))))  # (N, G, O/G, P)
        out = st.reshape(y, (n, o, *out_sp))
    if preferred_element_type is not None:
        out = ew.convert_element_type(out, dtypes.canonicalize(preferred_element_type))
    # (N, O, spatial...) to the out layout
    where = {ax: k for k, ax in enumerate(ospec)}
    return st.transpose(out, tuple(where[k] for k in range(out.ndim)))


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """conv_general_dilated in the NCHW / OIHW layouts without dilation (jax.lax.conv)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


_FOLDS = {"add": ew.add, "max": ew.max, "min": ew.min, "mul": ew.mul}
_NUMPY_NAMES = {"add": "add", "maximum": "max", "minimum": "min", "multiply": "mul"}


def _fold_of(computation) -> str | None:
    """Which of _FOLDS `computation` is: lax's functions, or nova.numpy's by name."""
    for name, f in _FOLDS.items():
        if computation == f:
            return name
    if getattr(computation, "__module__", "").startswith("nova."):
        return _NUMPY_NAMES.get(getattr(computation, "__name__", ""))
    return None


def reduce_window(operand, init_value, computation, window_dimensions: Sequence[int],
                  window_strides: Sequence[int] | None = None, padding="VALID",
                  base_dilation=None, window_dilation=None):
    """Reduces each window of operand with `computation` (lax.add, lax.max, lax.min or lax.mul
    -- or nova.numpy's add, maximum, minimum, multiply), starting from init_value, as
    jax.lax.reduce_window (pooling: max over 2x2 windows of stride 2, or a sum for an average).
    window_dimensions and window_strides cover every axis; padding "VALID", "SAME" or
    (low, high) pairs, padded with init_value. base_dilation: init_value between the operand's
    elements (XLA's base dilation, applied before the padding; "SAME" pads the dilated shape).
    Raises ValueError for another computation, mismatched lengths or non-positive sizes."""
    x = _array(operand)
    fold = _fold_of(computation)
    if fold is None:
        raise ValueError(f"reduce_window: computation must be lax.add, lax.max, lax.min or "
                         f"lax.mul, got {computation!r}")
    nd = x.ndim
    window = tuple(operator.index(k) for k in window_dimensions)
    strides = (1,) * nd if window_strides is None else \
        tuple(operator.index(s) for s in window_strides)
    wdil = (1,) * nd if window_dilation is None else \
        tuple(operator.index(d) for d in window_dilation)
    if len(window) != nd or len(strides) != nd or len(wdil) != nd:
        raise ValueError(f"reduce_window: window_dimensions, strides and dilation need {nd} "
                         f"entries (operand shape {x.shape})")
    bdil = (1,) * nd if base_dilation is None else \
        tuple(operator.index(d) for d in base_dilation)
    if len(bdil) != nd:
        raise ValueError(f"reduce_window: base_dilation needs {nd} entries (operand shape "
                         f"{x.shape})")
    for name, v in (("window_dimensions", window), ("window_strides", strides),
                    ("window_dilation", wdil), ("base_dilation", bdil)):
        if any(k < 1 for k in v):
            raise ValueError(f"reduce_window: {name} must be positive, got {v}")
    eff = [(k - 1) * d + 1 for k, d in zip(window, wdil, strict=True)]
    if isinstance(padding, str):
        dilated = [(n - 1) * d + 1 if n else 0 for n, d in zip(x.shape, bdil, strict=True)]
        pads = padtype_to_pads(dilated, eff, strides, padding)
    else:
        pads = [tuple(operator.index(p) for p in pair) for pair in padding]
        if len(pads) != nd or any(len(p) != 2 for p in pads):
            raise ValueError(f"reduce_window: padding must be {nd} (low, high) pairs, got "
                             f"{padding}")
    init = _array(init_value)
    if init.shape != ():
        raise ShapeError(f"reduce_window: init_value must be a scalar, got shape {init.shape}")
    init = ew.convert_element_type(init, x.dtype)
    x = sl.pad(x, init, [(lo, hi, d - 1) for (lo, hi), d in zip(pads, bdil, strict=True)])
    out_shape = [max(0, (p - k) // s + 1) for p, k, s in zip(x.shape, eff, strides,
                                                               strict=True)]
    acc = st.broadcast_in_dim(init, tuple(out_shape), ())
    if 0 in out_shape:
        return acc
    op = _FOLDS[fold]
    parts = list(_windows(x, window, strides, wdil, out_shape, lead=0))
    if fold not in ("max", "min") or not dtypes.is_float(x.dtype):
        for part in parts:
            acc = op(acc, part)
        return acc
    return _select_extremum(op, acc, parts)


def _select_extremum(op, acc, parts):
    """The max (or min) of init `acc` and the window `parts`, as one of them: the first part
    equal to it, else the last NaN part, else init -- so the derivative reaches that one part
    only (select's rule) instead of splitting among ties as a chain of max would."""
    m = acc
    for part in parts:
        m = op(m, ew.stop_gradient(part))
    m = ew.stop_gradient(m)
    out = acc
    for part in reversed(parts):
        out = ew.select(ew.eq(part, m), part, out)
    for part in parts:
        out = ew.select(ew.isnan(part), part, out)
    return out