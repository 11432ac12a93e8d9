"""jax.lax's convolution helpers over conv_general_dilated: shapes, layouts, transpose, patches."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from nova.core.errors import ShapeError
from nova.ops import slicing as sl
from nova.ops import structural as st
from nova.ops.composite import _jnp
from nova.ops.contraction import dot_general


class ConvDimensionNumbers(NamedTuple):
    """jax.lax.ConvDimensionNumbers: the positions of (batch, feature, spatial...) in lhs,
    (out feature, in feature, spatial...) in rhs, (batch, feature, spatial...) in the output."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def conv_general_permutations(dimension_numbers) -> tuple:
    """(lhs_perm, rhs_perm, out_perm) of layout strings such as ("NHWC", "HWIO", "NHWC")
    (jax.lax.conv_general_permutations): each the axis positions of (N, C, spatial...) /
    (O, I, spatial...) / (N, C, spatial...), spatial axes in the order rhs names them. Raises
    TypeError for non-strings, ValueError for layouts that are not permutations of one set."""
    if not (isinstance(dimension_numbers, Sequence) and len(dimension_numbers) == 3
            and all(isinstance(s, str) for s in dimension_numbers)):
        raise TypeError(f"conv_general_permutations: dimension_numbers must be three layout "
                        f"strings, got {dimension_numbers!r}")
    lhs, rhs, out = dimension_numbers
    for s, pair in ((lhs, "NC"), (rhs, "OI"), (out, "NC")):
        if len(set(s)) != len(s) or pair[0] not in s or pair[1] not in s:
            raise ValueError(f"conv_general_permutations: layout {s!r} must name distinct axes, "
                             f"{pair[0]} and {pair[1]} among them")
    spatial = [c for c in rhs if c not in "OI"]
    if not len(lhs) == len(rhs) == len(out) or \
            sorted(c for c in lhs if c not in "NC") != sorted(spatial) or \
            sorted(c for c in out if c not in "NC") != sorted(spatial):
        raise ValueError(f"conv_general_permutations: layouts {tuple(dimension_numbers)} do not "
                         "name the same spatial axes")

    def perm(s, pair):
        return (s.index(pair[0]), s.index(pair[1])) + tuple(s.index(c) for c in spatial)

    return perm(lhs, "NC"), perm(rhs, "OI"), perm(out, "NC")


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """The ConvDimensionNumbers of `dimension_numbers` (jax.lax.conv_dimension_numbers): None
    (NCHW... / OIHW... / NCHW...), three layout strings (conv_general_permutations: spatial
    axes in rhs' order, which is also the order of strides, padding and dilations), three
    position tuples, or a ConvDimensionNumbers (returned as it is). Raises ShapeError for
    operands of different ranks, ValueError for a malformed spec."""
    from nova.ops import convolution as cv

    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    nd = len(lhs_shape)
    if len(rhs_shape) != nd or nd < 2:
        raise ShapeError(f"conv_dimension_numbers: lhs of shape {tuple(lhs_shape)} and rhs of "
                         f"shape {tuple(rhs_shape)} need one rank >= 2")
    if isinstance(dimension_numbers, Sequence) and len(dimension_numbers) == 3 and \
            all(isinstance(s, str) for s in dimension_numbers):
        if any(len(s) != nd for s in dimension_numbers):
            raise ValueError(f"conv_dimension_numbers: layouts {tuple(dimension_numbers)} must "
                             f"each name {nd} axes")
        return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
    return ConvDimensionNumbers(*cv.conv_dimension_numbers(lhs_shape, rhs_shape,
                                                           dimension_numbers))


def _in_canonical(shape, spec) -> tuple:
    return tuple(shape[i] for i in spec)


def _to_layout(x, spec):
    """x in canonical (N, C, spatial...) order moved to the layout `spec` names."""
    where = {ax: k for k, ax in enumerate(spec)}
    return st.transpose(x, tuple(where[k] for k in range(x.ndim)))


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1) -> tuple:
    """The output shape (N / batch_group_count, O, spatial...) of a convolution of NCHW... lhs
    and OIHW... rhs shapes (jax.lax.conv_shape_tuple): floor((in + lo + hi - k) / stride) + 1
    per spatial axis, 0 when the kernel does not fit. pads: (low, high) pairs or "VALID" /
    "SAME" / "SAME_LOWER". Raises ValueError for a wrong number of strides or pads."""
    from nova.ops.convolution import padtype_to_pads

    nsp = len(lhs_shape) - 2
    strides = tuple(operator.index(s) for s in strides)
    if len(strides) != nsp or len(rhs_shape) != len(lhs_shape):
        raise ValueError(f"conv_shape_tuple: {len(strides)} strides for lhs {tuple(lhs_shape)} "
                         f"and rhs {tuple(rhs_shape)}")
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    pads = [tuple(operator.index(p) for p in pair) for pair in pads]
    if len(pads) != nsp or any(len(p) != 2 for p in pads):
        raise ValueError(f"conv_shape_tuple: padding must be {nsp} (low, high) pairs, got {pads}")
    out = [max(0, (n + lo + hi - k) // s + 1) for n, k, s, (lo, hi) in
           zip(lhs_shape[2:], rhs_shape[2:], strides, pads, strict=True)]
    return (lhs_shape[0] // batch_group_count, rhs_shape[0], *out)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                             dimension_numbers) -> tuple:
    """conv_shape_tuple in the layouts of dimension_numbers (jax.lax.conv_general_shape_tuple):
    the output shape in the out layout."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    canon = conv_shape_tuple(_in_canonical(lhs_shape, dn.lhs_spec),
                             _in_canonical(rhs_shape, dn.rhs_spec), window_strides, padding)
    return _permuted_shape(canon, dn.out_spec)


def _permuted_shape(canon, out_spec) -> tuple:
    out = [0] * len(canon)
    for k, ax in enumerate(out_spec):
        out[ax] = canon[k]
    return tuple(out)


def _conv_transpose_padding(k: int, s: int, padding: str) -> tuple[int, int]:
    """The (low, high) padding of the dilated input that makes a transposed convolution's output
    in * s ("SAME") or (in - 1) * s + k ("VALID") long, for a (dilated) kernel of size k."""
    mode = padding.upper()
    if mode == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    elif mode == "VALID":
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (low, high) pairs, "
                         f"got {padding!r}")
    return lo, total - lo


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers) -> tuple:
    """The output shape of conv_transpose in the out layout (jax.lax.conv_transpose_shape_tuple):
    (in - 1) * stride + lo + hi - k + 2 per spatial axis."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    lhs_t, rhs_t = _in_canonical(lhs_shape, dn.lhs_spec), _in_canonical(rhs_shape, dn.rhs_spec)
    strides = tuple(operator.index(s) for s in window_strides)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, s, padding)
                   for k, s in zip(rhs_t[2:], strides, strict=True)]
    out = [(n - 1) * s - k + 2 + lo + hi for n, k, s, (lo, hi) in
           zip(lhs_t[2:], rhs_t[2:], strides, padding, strict=True)]
    return _permuted_shape((lhs_t[0], rhs_t[0], *out), dn.out_spec)


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None) -> tuple:
    """The output shape of reduce_window (jax.lax.reduce_window_shape_tuple): padding is
    (low, high) pairs; the operand dilated by base_dilation, the window by window_dilation."""
    nd = len(operand_shape)
    bdil = (1,) * nd if base_dilation is None else tuple(base_dilation)
    wdil = (1,) * nd if window_dilation is None else tuple(window_dilation)
    if not len(window_dimensions) == len(window_strides) == len(padding) == len(bdil) == \
            len(wdil) == nd:
        raise ValueError(f"reduce_window_shape_tuple: window, strides, padding and dilations "
                         f"need {nd} entries (operand shape {tuple(operand_shape)})")
    out = []
    for n, w, s, (lo, hi), b, d in zip(operand_shape, window_dimensions, window_strides,
                                       padding, bdil, wdil, strict=True):
        padded = ((n - 1) * b + 1 if n else 0) + lo + hi
        out.append(max(0, (padded - ((w - 1) * d + 1)) // s + 1))
    return tuple(out)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """conv_general_dilated in the NCHW / OIHW layouts (jax.lax.conv_with_general_padding)."""
    from nova.ops.convolution import conv_general_dilated

    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_LAYOUTS = {3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                      5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision=None, preferred_element_type=None,
                   use_consistent_padding: bool = False):
    """The transposed ("fractionally strided") convolution (jax.lax.conv_transpose): lhs
    dilated by `strides`, then a stride-1 convolution with rhs.

    lhs, rhs: rank n + 2 in the layouts of dimension_numbers (default TensorFlow's: NHC / HIO,
    NHWC / HWIO, NHWDC / HWDIO for n = 1, 2, 3). padding: "SAME" (output in * stride),
    "VALID" (output (in - 1) * stride + k) or (low, high) pairs, which are the padding of the
    transposed convolution itself, or with use_consistent_padding=True that of the forward
    convolution it transposes (then d * (k - 1) - p is padded). transpose_kernel=True flips the
    kernel's spatial axes and swaps its I and O axes (the gradient of conv, as Keras'
    Conv2DTranspose). Raises ValueError for a rank without a default layout or bad padding.
    """
    from nova.ops.convolution import conv_general_dilated

    jnp = _jnp()
    x, w = jnp.asarray(lhs), jnp.asarray(rhs)
    if dimension_numbers is None:
        if x.ndim not in _TRANSPOSE_LAYOUTS:
            raise ValueError(f"conv_transpose: no default layout for rank {x.ndim}; give "
                             "dimension_numbers")
        dimension_numbers = _TRANSPOSE_LAYOUTS[x.ndim]
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    nsp = x.ndim - 2
    strides = tuple(operator.index(s) for s in strides)
    rdil = (1,) * nsp if rhs_dilation is None else tuple(operator.index(d) for d in rhs_dilation)
    if len(strides) != nsp or len(rdil) != nsp:
        raise ValueError(f"conv_transpose: strides {strides} and rhs_dilation {rdil} need {nsp} "
                         "entries")
    kernel = [(w.shape[a] - 1) * d + 1 for a, d in zip(dn.rhs_spec[2:], rdil, strict=True)]
    if isinstance(padding, str):
        pads = [_conv_transpose_padding(k, s, padding) for k, s in zip(kernel, strides,
                                                                       strict=True)]
    else:
        pads = [tuple(operator.index(p) for p in pair) for pair in padding]
        if len(pads) != nsp or any(len(p) != 2 for p in pads):
            raise ValueError(f"conv_transpose: padding must be {nsp} (low, high) pairs, got "
                             f"{padding}")
        if use_consistent_padding:
            pads = [(k - 1 - lo, k - 1 - hi) for k, (lo, hi) in zip(kernel, pads, strict=True)]
    if transpose_kernel:
        w = sl.rev(w, tuple(dn.rhs_spec[2:]))
        r = dn.rhs_spec
        dn = ConvDimensionNumbers(dn.lhs_spec, (r[1], r[0], *r[2:]), dn.out_spec)
    return conv_general_dilated(x, w, (1,) * nsp, pads, lhs_dilation=strides,
                                rhs_dilation=rdil, dimension_numbers=dn, precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_pads(name, padding, in_shape, kernel, strides, ldil) -> list:
    """(low, high) per spatial axis, as conv_general_dilated resolves them."""
    from nova.ops.convolution import padtype_to_pads

    if isinstance(padding, str):
        if any(d != 1 for d in ldil):
            raise ValueError(f"{name}: string padding is not implemented with lhs_dilation; "
                             "give (low, high) pairs")
        return padtype_to_pads(in_shape, kernel, strides, padding)
    pads = [tuple(operator.index(p) for p in pair) for pair in padding]
    if len(pads) != len(in_shape) or any(len(p) != 2 for p in pads):
        raise ValueError(f"{name}: padding must be {len(in_shape)} (low, high) pairs, got "
                         f"{padding}")
    return pads


def conv_general_dilated_patches(lhs, filter_shape: Sequence[int], window_strides, padding,
                                 lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                                 precision=None, preferred_element_type=None):
    """The image patches that conv_general_dilated with a `filter_shape` kernel multiplies
    (jax.lax.conv_general_dilated_patches): the output's feature axis holds each patch
    flattened in the order (input feature, then the kernel's spatial axes in rhs' order), so
    its size is C * prod(filter_shape); the output is in the out layout of dimension_numbers.

    Taken by strided slices (no multiplication), so patches are exact for every value,
    inf and NaN included. filter_shape, strides and dilations follow rhs' spatial order.
    Raises ShapeError / ValueError as conv_general_dilated.
    """
    from nova.ops.convolution import _ints, _windows

    jnp = _jnp()
    x = jnp.asarray(lhs)
    if x.ndim < 2:
        raise ShapeError(f"conv_general_dilated_patches: lhs needs a batch and a feature axis, "
                         f"got shape {x.shape}")
    dn = conv_dimension_numbers(x.shape, x.shape, dimension_numbers)
    nsp = x.ndim - 2
    filt = tuple(operator.index(k) for k in filter_shape)
    if len(filt) != nsp or any(k < 1 for k in filt):
        raise ValueError(f"conv_general_dilated_patches: filter_shape must be {nsp} positive "
                         f"ints, got {filt}")
    strides = _ints("window_strides", window_strides, nsp, 1)
    ldil = _ints("lhs_dilation", lhs_dilation, nsp, 1)
    rdil = _ints("rhs_dilation", rhs_dilation, nsp, 1)
    xt = st.transpose(x, dn.lhs_spec)  # (N, C, spatial in rhs order)
    eff = [(k - 1) * d + 1 for k, d in zip(filt, rdil, strict=True)]
    pads = _conv_pads("conv_general_dilated_patches", padding, xt.shape[2:], eff, strides, ldil)
    xp = sl.pad(xt, np.zeros((), x.dtype), [(0, 0, 0), (0, 0, 0)] +
                [(lo, hi, d - 1) for (lo, hi), d in zip(pads, ldil, strict=True)])
    out_sp = [max(0, (p - k) // s + 1) for p, k, s in zip(xp.shape[2:], eff, strides,
                                                           strict=True)]
    n, c, kk = xt.shape[0], xt.shape[1], math.prod(filt)
    if 0 in out_sp or n * c == 0:
        out = jnp.zeros((n, c * kk, *out_sp), x.dtype)
    else:
        cols = list(_windows(xp, filt, strides, rdil, out_sp, lead=2))  # each (N, C, out...)
        out = jnp.stack(cols, axis=2).reshape(n, c * kk, *out_sp)
    if preferred_element_type is not None:
        out = out.astype(preferred_element_type)
    return _to_layout(out, dn.out_spec)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape: Sequence[int],
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """A convolution with a separate kernel at every output position (a locally connected
    layer; jax.lax.conv_general_dilated_local).

    rhs: in its layout, out features O, I = C * prod(filter_shape) (the patch order of
    conv_general_dilated_patches: input feature, then the window's spatial axes in rhs'
    order), and spatial axes the output's positions. out[n, o, p] = sum_i patches[n, i, p] *
    rhs[o, i, p]. Raises ShapeError when rhs does not have that shape.
    """
    jnp = _jnp()
    x, w = jnp.asarray(lhs), jnp.asarray(rhs)
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    canonical = tuple(range(x.ndim))
    patches = conv_general_dilated_patches(
        x, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation,
        ConvDimensionNumbers(dn.lhs_spec, canonical, canonical))  # (N, C * K, out...)
    wt = st.transpose(w, dn.rhs_spec)  # (O, C * K, out...)
    if wt.shape[1:] != patches.shape[1:]:
        raise ShapeError(f"conv_general_dilated_local: rhs has (I, spatial) = {wt.shape[1:]} in "
                         f"its layout; patches of filter_shape {tuple(filter_shape)} need "
                         f"{patches.shape[1:]}")
    n, ck, out_sp = patches.shape[0], patches.shape[1], patches.shape[2:]
    npos = math.prod(out_sp)
    pt = st.transpose(patches.reshape(n, ck, npos), (2, 0, 1))  # (P, N, I)
    wp = st.transpose(wt.reshape(wt.shape[0], ck, npos), (2, 1, 0))  # (P, I, O)
    y = dot_general(pt, wp, (((2,), (1,)), ((0,), (0,))))  # (P, N, O)
    out = st.transpose(y, (1, 2, 0)).reshape(n, wt.shape[0], *out_sp)
    return _to_layout(out, dn.out_spec)
